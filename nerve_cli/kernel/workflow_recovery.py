"""What happens to threads when things go wrong: worker deaths, load failures, restarts, timeouts.

The WorkflowManager's policy for threads it can no longer run normally, kept
apart from the happy path: idempotent threads resume from their persisted
chain, the others end `crashed`; a workflow that does not load fails its
threads with the load error; thread_timeout cancels a thread that runs too long.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from nerve_cli.config.model import format_duration
from nerve_cli.kernel.workflow_kind import Kind, Thread
from nerve_cli.store.logs import now_ms, query_logs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.wire import protocol
from nerve_cli.workflow.model import rounds_used

if TYPE_CHECKING:
    from nerve_cli.kernel.workflows import WorkflowManager


def arm_thread_timeout(mgr: WorkflowManager, kind: Kind, thread: Thread) -> None:
    cfg = mgr.config.workflows.get(kind.name)
    if cfg is None or cfg.thread_timeout is None or thread.started_ms is None:
        return
    remaining = cfg.thread_timeout - (now_ms() - thread.started_ms) / 1000
    reason = f"thread_timeout {format_duration(cfg.thread_timeout)} exceeded"
    asyncio.get_running_loop().call_later(max(0.0, remaining), thread_timed_out, mgr, kind, thread, reason)


def thread_timed_out(mgr: WorkflowManager, kind: Kind, thread: Thread, reason: str) -> None:
    if kind.running.get(thread.run_id) is not thread:
        return  # ended (or resumed as a new Thread) meanwhile
    if thread.dispatched and kind.worker is not None:
        kind.worker.send(protocol.ThreadCancel(thread.run_id, reason))  # ends `failed`, "cancelled: ..."
        return
    del kind.running[thread.run_id]
    mgr._event(thread, "failed", {"reason": f"cancelled: {reason}", "rounds": rounds_used(thread.messages)})
    mgr._pump(kind)
    mgr._flush()


def lose_threads(mgr: WorkflowManager, kind: Kind, reason: str, *, resume: bool) -> None:
    """The worker went away under running threads: resume them (idempotent) or crash them."""
    for thread in list(kind.running.values()):
        thread.dispatched = False
        if not resume:
            del kind.running[thread.run_id]
            mgr._event(thread, "crashed", {"reason": reason, "rounds": rounds_used(thread.messages)})
            mgr.report("error", f"workflow {kind.name}: {thread.run_id} crashed: {reason}")
        else:
            mgr._event(thread, "started", {"resumed": True, "rounds": rounds_used(thread.messages),
                                           "reason": reason})
            mgr.report("warn", f"workflow {kind.name}: {thread.run_id} resumes after: {reason}")


def abandon(mgr: WorkflowManager, kind: Kind, reason: str) -> None:
    """At shutdown: idempotent threads stay `started` (resumed next start); the others crash."""
    cfg = mgr.config.workflows.get(kind.name)
    for thread in list(kind.running.values()):
        if cfg is not None and cfg.idempotent:
            mgr.report("info", f"workflow {kind.name}: {thread.run_id} will resume at the next start")
        else:
            mgr._event(thread, "crashed", {"reason": reason, "rounds": rounds_used(thread.messages)})
    kind.running.clear()


def fail_if_broken(mgr: WorkflowManager, kind: Kind) -> bool:
    """A workflow whose file failed to load (and has not changed since) fails new threads at once."""
    failure = kind.current_load_error(mgr.home)
    if failure is None:
        return False
    fail_all(mgr, kind, f"workflow {kind.name} failed to load: {failure.summary()}", failure)
    return True


def fail_all(mgr: WorkflowManager, kind: Kind, reason: str, error: protocol.ErrorInfo | None = None) -> None:
    for thread in list(kind.running.values()):
        del kind.running[thread.run_id]
        payload: dict[str, Any] = {"reason": reason, "rounds": rounds_used(thread.messages)}
        if error is not None:
            payload["error"] = error.__dict__
        mgr._event(thread, "failed", payload)
        mgr.report("error", f"workflow {kind.name}: {thread.run_id} failed: {reason}")


def recover_started(mgr: WorkflowManager, row: dict) -> None:
    name, run_id = row["workflow"], row["run_id"]
    cfg = mgr.config.workflows.get(name)
    request = queued_request(mgr.logs.path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    if cfg is None or not cfg.idempotent:
        why = "engine restarted while the thread ran"
        if cfg is None:
            why += f" (workflow {name} is no longer in nerve.yaml)"
        mgr._event(thread, "crashed", {"reason": why})
        return
    try:
        chain = persisted_chain(mgr.logs.path, run_id)
    except ValueError as exc:
        mgr._event(thread, "crashed", {"reason": f"cannot resume: {exc}"})
        return
    thread.messages = [m.to_dict() for m in chain]
    starts = query_logs(mgr.logs.path, source="workflow", type="started", ref=run_id)
    thread.started_ms = starts[0]["ts"] if starts else None
    if thread.messages:
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
    thread.resumed = True
    mgr._kind(name).queue.append(thread)


def recover_queued(mgr: WorkflowManager, row: dict) -> None:
    name, run_id = row["workflow"], row["run_id"]
    request = queued_request(mgr.logs.path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    if name not in mgr.config.workflows:
        mgr._event(thread, "dropped", {"reason": f"workflow {name} is no longer in nerve.yaml"})
        return
    mgr._kind(name).queue.append(thread)
