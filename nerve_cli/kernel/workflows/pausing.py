"""Paused threads: `nerve thread pause|resume run-N` (and MCP `pause_thread|resume_thread`).

A paused thread holds no slot and starts no round until it is resumed; on disk it is `paused` in
workflow_runs, so it survives restarts. What it was decides how it stops:

- queued or waiting: it leaves the queue (or stops waiting) at once;
- running: its running round finishes. The round's message is written as usual, but the worker is not
  told it may go on: the kernel cancels the thread there (nothing of the next round has begun), and it is
  `paused` once the worker lets go of it (its moderator is asked for the next step at the resume).

Resume looks at the chain alone: a chain whose last message waits (a person, an event) waits again —
its wait counts afresh from the resume, and an event wait reads its source from where the wait began,
so an event that matched during the pause resumes it now; any other chain is queued and goes on from
its last round. Both rows carry `resumed_from: paused` (nerve-threads signals them as `resumed`).

Each function decides and writes through the journal, then returns; the manager starts what can start
next and keeps the timers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.waits import pending_wait
from nerve_cli.errors import WorkflowError
from nerve_cli.kernel.workflows import gates
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.logs import now_ms, workflow_runs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.vocab.states import ThreadStatus

PAUSED = ThreadStatus.PAUSED
RESUMED_FROM = "resumed_from"  # the key of the row a resume writes (its value: "paused")
PAUSE_REASON = "paused"  # what the worker is told when a running thread's round is over


def park(journal: Journal, kind: Kind, thread: Thread, was: ThreadStatus, by: str, via: str | None) -> None:
    """Record the thread `paused` (the caller has taken it out of running, the queue or waiting)."""
    for timer in (thread.timer, thread.run_timer, thread.cancel_timer):
        if timer is not None:
            timer.cancel()
    thread.timer = thread.run_timer = thread.cancel_timer = None
    thread.dispatched, thread.pausing, thread.wait = False, None, None
    thread.waiting_since = None
    kind.paused[thread.run_id] = thread
    extra = {"via": via} if via is not None else {}
    journal.status(thread, PAUSED, was=was.value, by=by, rounds=thread.rounds, **extra)
    journal.report("info", f"workflow {kind.name}: {thread.run_id} paused by {by} (it was {was}; "
                           f"`nerve thread resume {thread.run_id}` goes on)")


def unpark(journal: Journal, kind: Kind, thread: Thread, by: str, via: str | None) -> ThreadStatus:
    """Take the thread out of `paused`: WAITING (it is in `kind.waiting`, the caller arms its wait) or QUEUED
    (the caller queues it)."""
    del kind.paused[thread.run_id]
    extra: dict[str, Any] = {RESUMED_FROM: PAUSED.value, "by": by, **({"via": via} if via is not None else {})}
    wait = pending_wait(thread.messages)
    if wait is not None:
        thread.wait, thread.waiting_since = wait, now_ms()
        kind.waiting[thread.run_id] = thread
        journal.status(thread, ThreadStatus.WAITING, **gates.waiting_payload(thread), **extra)
        return ThreadStatus.WAITING
    journal.status(thread, ThreadStatus.QUEUED, prompt=thread.prompt, max_rounds=thread.max_rounds,
                   origin=thread.origin, **extra)
    thread.started_ms = None  # thread_timeout counts running time
    thread.resumed = bool(thread.messages)
    return ThreadStatus.QUEUED


def paused_thread(logs_path: Path, row: dict) -> Thread:
    """A `paused` row of workflow_runs as the Thread it was (its request and chain); WorkflowError when its chain
    cannot be read."""
    run_id, name = row["run_id"], row["workflow"]
    request = queued_request(logs_path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    thread.restore(request)
    try:
        chain = persisted_chain(logs_path, run_id)
    except ValueError as exc:
        raise WorkflowError(f"{run_id} cannot resume: {exc}") from None
    thread.messages = [m.to_dict() for m in chain]
    if chain:
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
        thread.resumed = True
    return thread


def not_pausable(logs_path: Path, run_id: str, *, resume: bool) -> WorkflowError:
    """Why a thread cannot be paused (it is not live, or already paused) or resumed (it is not paused)."""
    rows = [r for r in workflow_runs(logs_path) if r["run_id"] == run_id]
    if not rows:
        return WorkflowError(f"no thread {run_id} (see `nerve thread list`)")
    status = rows[0]["status"]
    if resume:
        return WorkflowError(f"{run_id} is {status}, not paused: only a paused thread can be resumed "
                             f"(`nerve thread pause {run_id}` pauses a live one)")
    if status == PAUSED:
        return WorkflowError(f"{run_id} is already paused (`nerve thread resume {run_id}` goes on)")
    return WorkflowError(f"{run_id} is {status}: only a queued, running or waiting thread can be paused")
