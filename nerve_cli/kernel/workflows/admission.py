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
    """STARTED (the caller starts it now), QUEUED or DROPPED. `holding`: the manager is stopping."""
    if holding or kind.draining:
        kind.queue.append(thread)  # persisted as queued; started after the restart/reload
        return QUEUED
    if len(kind.running) < cfg.concurrency and not kind.queue:
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
    """The first queued thread (by priority, with ageing) if there is room for it now (taken off the queue)."""
    if cfg and kind.queue and len(kind.running) < cfg.concurrency and not (holding or kind.draining):
        return kind.queue.popleft()
    return None
