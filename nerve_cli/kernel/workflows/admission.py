"""Admission: whether a requested thread may run, and whether it starts now, waits or is dropped.

The WorkflowManager asks; the rules live here (nerve.yaml `workflows.<name>`:
enabled, concurrency, overflow, max_queue; `engine.max_rounds` caps rounds).
A thread that may start is returned to the manager, which starts it.
"""

from __future__ import annotations

from nerve_cli.config.launch import capped_rounds as capped_rounds  # re-exported: the request's checks
from nerve_cli.config.launch import check_request as check_request
from nerve_cli.config.launch import launchable as launchable
from nerve_cli.config.model import WorkflowConfig
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.vocab.states import ThreadStatus

STARTED, QUEUED, DROPPED = "started", "queued", "dropped"


def admit(journal: Journal, kind: Kind, cfg: WorkflowConfig, thread: Thread, *, holding: bool) -> str:
    """STARTED (the caller starts it now), QUEUED or DROPPED. `holding`: the manager is stopping.

    A thread whose `concurrency_key` a live thread holds (or a queued one waits for) is queued behind it, or
    dropped (`key_overflow: drop`; `replace` cancelled the holders before this)."""
    if holding or kind.draining:
        kind.queue.append(thread)  # persisted as queued; started after the restart/reload
        return QUEUED
    held = kind.held_keys()
    holder = held.get(thread.key) if thread.key is not None else None
    if holder is None and thread.key is not None:
        holder = next((t.run_id for t in kind.queue if t.key == thread.key), None)
    if holder is not None and cfg.key_overflow == "drop":
        journal.status(thread, ThreadStatus.DROPPED, reason=f"its concurrency_key {cfg.concurrency_key} = "
                                                            f"{thread.key} is held by {holder} (key_overflow: drop)")
        return DROPPED
    free = len(kind.running) < cfg.concurrency
    if free and holder is None and not any(_may_start(t, held) for t in kind.queue):
        return STARTED
    if cfg.overflow == "drop":
        journal.status(thread, ThreadStatus.DROPPED, reason=f"at capacity: {len(kind.running)} of {cfg.concurrency} "
                                                    "threads running (overflow: drop)")
        return DROPPED
    if len(kind.queue) >= cfg.max_queue:
        oldest = kind.queue.drop_oldest_lowest()
        journal.status(oldest, ThreadStatus.DROPPED, reason=f"queue full (max_queue {cfg.max_queue}): the oldest "
                                                    f"request of the lowest priority ({oldest.priority}) was dropped "
                                                    f"to make room for {thread.run_id}")
    kind.queue.append(thread)
    return QUEUED


def next_queued(kind: Kind, cfg: WorkflowConfig | None, *, holding: bool) -> Thread | None:
    """The first queued thread (by priority, with ageing) whose key is free, if there is room for it now (taken off
    the queue)."""
    if cfg and kind.queue and len(kind.running) < cfg.concurrency and not (holding or kind.draining):
        held = kind.held_keys()
        return kind.queue.take_first(lambda t: _may_start(t, held))
    return None


def _may_start(thread: Thread, held: dict[str, str]) -> bool:
    """Not held back by its key: it has none, or no live thread holds it."""
    return thread.key is None or thread.key not in held
