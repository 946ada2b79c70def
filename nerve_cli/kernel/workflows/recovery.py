"""What happens to threads when things go wrong: worker deaths, load failures, restarts, timeouts.

The WorkflowManager's policy for threads it can no longer run normally, kept
apart from the happy path: idempotent threads resume from their persisted
chain, the others end `crashed`; a workflow that does not load fails its
threads with the load error; thread_timeout cancels a thread that runs too long.

Each function decides and writes through the journal, then returns; the
manager (or the worker side) starts what can start next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.config.model import WorkflowConfig, format_duration
from nerve_cli.kernel.workflows import control
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.logs import now_ms, query_logs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.vocab.states import ThreadStatus
from nerve_cli.wire import protocol


def thread_deadline(cfg: WorkflowConfig | None, thread: Thread) -> tuple[float, str] | None:
    """(seconds left, reason) for the thread's thread_timeout, or None when it has none."""
    if cfg is None or cfg.thread_timeout is None or thread.started_ms is None:
        return None
    remaining = cfg.thread_timeout - (now_ms() - thread.started_ms) / 1000
    return max(0.0, remaining), f"thread_timeout {format_duration(cfg.thread_timeout)} exceeded"


def time_out(journal: Journal, kind: Kind, thread: Thread, reason: str) -> bool:
    """The thread ran past its thread_timeout; True when it ended here (not on a worker: room for the next)."""
    if kind.running.get(thread.run_id) is not thread:
        return False  # ended (or resumed as a new Thread) meanwhile
    if thread.dispatched and kind.worker is not None:
        kind.worker.send(protocol.ThreadCancel(thread.run_id, reason))  # ends `failed`, "cancelled: ..."
        return False
    del kind.running[thread.run_id]
    journal.status(thread, ThreadStatus.FAILED, reason=f"cancelled: {reason}", rounds=thread.rounds)
    return True


def fail_unsendable(journal: Journal, kind: Kind, thread: Thread, size: int) -> None:
    """A chain too long for one line to the worker (a thread resumed after many large rounds) ends here, failed."""
    del kind.running[thread.run_id]
    if thread.run_timer is not None:
        thread.run_timer.cancel()
        thread.run_timer = None
    reason = (f"its chain is {size / 2**20:.1f} MiB, and a thread is handed to its worker (at a start or a resume) "
              f"in one message of at most {protocol.MAX_LINE // 2**20} MiB; keep large data out of the messages "
              "(a file or a sense's table, with its path in the message)")
    journal.status(thread, ThreadStatus.FAILED, reason=reason, rounds=thread.rounds)
    journal.report("error", f"workflow {kind.name}: {thread.run_id} failed: {reason}")


def lose_threads(journal: Journal, kind: Kind, reason: str, *, resume: bool) -> None:
    """The worker went away under running threads: resume them (idempotent) or crash them; one that was
    being cancelled ends `cancelled`. A thread never handed to it loses nothing: it waits for the next one."""
    for thread in list(kind.running.values()):
        if not thread.dispatched:
            continue
        thread.dispatched = False
        if thread.cancelling is not None:
            del kind.running[thread.run_id]
            control.cancelled(journal, kind, thread, ThreadStatus.STARTED, *thread.cancelling)
        elif not resume:
            del kind.running[thread.run_id]
            journal.status(thread, ThreadStatus.CRASHED, reason=reason, rounds=thread.rounds)
            journal.report("error", f"workflow {kind.name}: {thread.run_id} crashed: {reason}")
        else:
            journal.status(thread, ThreadStatus.STARTED, resumed=True, rounds=thread.rounds, reason=reason)
            journal.report("warn", f"workflow {kind.name}: {thread.run_id} resumes after: {reason}")


def abandon(journal: Journal, kind: Kind, cfg: WorkflowConfig | None, reason: str) -> None:
    """At shutdown: idempotent threads stay `started` (resumed next start); the others crash."""
    for thread in list(kind.running.values()):
        if cfg is not None and cfg.idempotent:
            journal.report("info", f"workflow {kind.name}: {thread.run_id} will resume at the next start")
        else:
            journal.status(thread, ThreadStatus.CRASHED, reason=reason, rounds=thread.rounds)
    kind.running.clear()


def fail_if_broken(journal: Journal, kind: Kind, home: Path) -> bool:
    """A workflow whose file failed to load (and has not changed since) fails new threads at once."""
    failure = kind.current_load_error(home)
    if failure is None:
        return False
    fail_all(journal, kind, f"workflow {kind.name} failed to load: {failure.summary()}", failure)
    return True


def fail_all(journal: Journal, kind: Kind, reason: str, error: protocol.ErrorInfo | None = None) -> None:
    for thread in list(kind.running.values()):
        del kind.running[thread.run_id]
        payload: dict[str, Any] = {"reason": reason, "rounds": thread.rounds}
        if error is not None:
            payload["error"] = error.__dict__
        journal.status(thread, ThreadStatus.FAILED, **payload)
        journal.report("error", f"workflow {kind.name}: {thread.run_id} failed: {reason}")


def recover_started(journal: Journal, cfg: WorkflowConfig | None, row: dict) -> Thread | None:
    """A thread that was running when the engine stopped: the thread to queue again, or None (it crashed)."""
    name, run_id = row["workflow"], row["run_id"]
    logs_path = journal.logs.path
    request = queued_request(logs_path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    thread.restore(request)
    if cfg is None or not cfg.idempotent:
        why = "engine restarted while the thread ran"
        if cfg is None:
            why += f" (workflow {name} is no longer in nerve.yaml)"
        journal.status(thread, ThreadStatus.CRASHED, reason=why)
        return None
    try:
        chain = persisted_chain(logs_path, run_id)
    except ValueError as exc:
        journal.status(thread, ThreadStatus.CRASHED, reason=f"cannot resume: {exc}")
        return None
    thread.messages = [m.to_dict() for m in chain]
    starts = query_logs(logs_path, source="workflow", type="started", ref=run_id)
    thread.started_ms = starts[0]["ts"] if starts else None
    if thread.messages:
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
    thread.resumed = True
    return thread


def recover_queued(journal: Journal, cfg: WorkflowConfig | None, row: dict) -> Thread | None:
    """A thread that was queued when the engine stopped: the thread to queue again, or None (dropped)."""
    name, run_id = row["workflow"], row["run_id"]
    request = queued_request(journal.logs.path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    thread.restore(request)
    if cfg is None:
        journal.status(thread, ThreadStatus.DROPPED, reason=f"workflow {name} is no longer in nerve.yaml")
        return None
    try:
        chain = persisted_chain(journal.logs.path, run_id)
    except ValueError as exc:
        journal.status(thread, ThreadStatus.CRASHED, reason=f"cannot resume: {exc}")
        return None
    if chain:  # queued again after a person's answer: it goes on from its chain
        thread.messages = [m.to_dict() for m in chain]
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
        thread.resumed = True
    return thread
