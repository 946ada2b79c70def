"""Admission: whether a requested thread may run, and whether it starts now, waits or is dropped.

The WorkflowManager asks; the rules live here (nerve.yaml `workflows.<name>`:
enabled, concurrency, overflow, max_queue; `engine.max_rounds` caps rounds).
A thread that may start is returned to the manager, which starts it.
"""

from __future__ import annotations

from typing import Any

from nerve_cli.config.model import NerveConfig, WorkflowConfig
from nerve_cli.config.rules import nearest
from nerve_cli.errors import WorkflowError
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.vocab.states import ThreadStatus

STARTED, QUEUED, DROPPED = "started", "queued", "dropped"


def check_request(config: NerveConfig, workflow: str, prompt: Any, max_rounds: Any) -> tuple[WorkflowConfig, int]:
    """The workflow's settings and the rounds it gets; WorkflowError for a request that cannot run."""
    cfg = launchable(config, workflow)
    rounds = capped_rounds(config, max_rounds)
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkflowError(f"workflow {workflow}: the prompt is empty")
    return cfg, rounds


def launchable(config: NerveConfig, workflow: str) -> WorkflowConfig:
    cfg = config.workflows.get(workflow)
    if cfg is None:
        known = ", ".join(sorted(config.workflows)) or "none"
        close = nearest(workflow, list(config.workflows))
        fix = f"did you mean `{close}`?" if close else f"create it with `nerve workflow new {workflow}`"
        raise WorkflowError(f"unknown workflow {workflow!r} (nerve.yaml workflows: {known}); {fix}")
    if not cfg.enabled:
        raise WorkflowError(f"workflow {workflow} is disabled (nerve.yaml: workflows.{workflow}.enabled "
                            f"is false); enable it with `nerve workflow enable {workflow}`")
    return cfg


MAX_REQUEST = 2**63 - 1  # a larger request could not be logged (64-bit JSON integers)


def capped_rounds(config: NerveConfig, requested: Any) -> int:
    cap = config.engine.max_rounds
    if requested is None:
        return cap
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_REQUEST:
        raise WorkflowError(f"max_rounds must be a whole number from 1 to {MAX_REQUEST}, got {requested!r:.40} "
                            f"(the engine caps it at engine.max_rounds, {cap}, anyway)")
    return min(requested, cap)  # the engine has the last word: engine.max_rounds caps any request


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
        oldest = kind.queue.popleft()
        journal.status(oldest, ThreadStatus.DROPPED, reason=f"queue full (max_queue {cfg.max_queue}): the oldest "
                                                    f"request was dropped to make room for {thread.run_id}")
    kind.queue.append(thread)
    return QUEUED


def next_queued(kind: Kind, cfg: WorkflowConfig | None, *, holding: bool) -> Thread | None:
    """The oldest queued thread if there is room for it now (taken off the queue), else None."""
    if cfg and kind.queue and len(kind.running) < cfg.concurrency and not (holding or kind.draining):
        return kind.queue.popleft()
    return None
