"""The WorkflowManager's worker side: spawn a workflow worker, hear it, notice when it dies.

Policy lives here (backoff, how many failed starts before giving up, what a
death means for running threads); the process handle (`WorkerProcess`) only
knows the child.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from nerve_cli.kernel import workflow_recovery as recovery
from nerve_cli.kernel.process import WorkerProcess, worker_argv
from nerve_cli.wire import protocol
from nerve_cli.workflow.model import rounds_used

if TYPE_CHECKING:
    from nerve_cli.kernel.workflow_kind import Kind, Thread
    from nerve_cli.kernel.workflows import WorkflowManager

END_STATUSES = ("completed", "failed")


def backoff_delay(backoff: tuple[float, float], crashes: int) -> float:
    base, cap = backoff
    return 0.0 if crashes <= 0 else min(base * 2 ** (crashes - 1), cap)


async def spawn(mgr: WorkflowManager, kind: Kind) -> None:
    """Start the kind's worker (after a backoff if it has been dying), then serve its threads."""
    delay = backoff_delay(mgr.backoff, kind.crashes)
    if delay:
        await asyncio.sleep(delay)
    stat = kind.file_stat(mgr.home)  # before the import: an edit after it means "try again"
    argv = worker_argv("workflow", "--name", kind.name, "--home", str(mgr.home))
    worker = WorkerProcess(
        f"workflow={kind.name}", argv,
        on_message=lambda w, m: mgr.on_message(kind, w, m),
        on_stderr=lambda w, line: mgr.report("info", f"workflow {kind.name} pid {w.pid}: {line}"),
        cwd=str(mgr.home),
    )
    kind.worker = worker
    try:
        await worker.start()
        ready = await worker.wait_ready(mgr.ready_timeout)
    except (OSError, RuntimeError, TimeoutError) as exc:
        await _start_failed(mgr, kind, worker, exc)
        return
    if ready.failed:
        await _load_failed(mgr, kind, worker, ready, stat)
        return
    kind.state = "ready"
    mgr._system("worker_started", {"workflow": kind.name, "pid": worker.pid})
    mgr.background(_watch(mgr, kind, worker))
    mgr._pump(kind)
    mgr._flush()


async def _start_failed(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess, exc: BaseException) -> None:
    kind.crashes += 1
    if worker.alive:
        await worker.terminate(1.0)
    kind.worker, kind.state = None, "stopped"
    tail = " | ".join(list(worker.stderr_tail)[-3:])
    why = f"{exc}" + (f" (stderr: {tail})" if tail else "")
    mgr._system("error", {"workflow": kind.name, "message": f"workflow {kind.name}: worker did not start: {why}",
                          "error_type": "WorkerStartError"})
    if kind.crashes >= mgr.start_tries:
        recovery.fail_all(mgr, kind, f"workflow {kind.name}: its worker failed to start {kind.crashes} times: {why}")
        kind.crashes = 0
    mgr._pump(kind)
    mgr._flush()


async def _load_failed(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess,
                       ready: protocol.Ready, stat: tuple[int, int] | None) -> None:
    info = ready.failed.get(kind.name) or next(iter(ready.failed.values()))
    if await worker.wait_exit(2.0) is None:
        await worker.terminate(1.0)
    kind.worker, kind.state = None, "stopped"
    kind.load_error = (stat, info)
    mgr._system("error", {"workflow": kind.name, "message": f"workflow {kind.name} failed to load: {info.summary()}",
                          "error_type": info.type, "traceback": info.traceback, "file": info.file,
                          "line": info.line})
    mgr._pump(kind)  # fails the waiting threads with the load error
    mgr._flush()


async def _watch(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess) -> None:
    """Wait for the worker to exit; an exit we did not ask for is a crash."""
    await worker.wait_exit()
    if worker is not kind.worker:
        return  # retired on purpose (idle, reload, shutdown)
    kind.worker, kind.state = None, "stopped"
    kind.cancel_idle()
    exit_text = worker.describe_exit()
    mgr._system("worker_exited", {"workflow": kind.name, "pid": worker.pid, "exit": exit_text,
                                  "threads": sorted(kind.running)})
    if kind.running:
        kind.crashes += 1
        reason = f"worker exited with {exit_text}"
        cfg = mgr.config.workflows.get(kind.name)
        resume = cfg is not None and cfg.idempotent and kind.crashes <= mgr.max_crashes
        if cfg is not None and cfg.idempotent and not resume:
            reason += f" ({kind.crashes} times in a row without progress; not resumed again)"
            kind.crashes = 0
        recovery.lose_threads(mgr, kind, reason, resume=resume)
        if kind.running:
            delay = backoff_delay(mgr.backoff, kind.crashes)
            mgr._system("worker_respawn", {"workflow": kind.name, "attempt": kind.crashes, "delay_s": delay})
            mgr.report("warn", f"workflow {kind.name}: worker pid {worker.pid} died ({exit_text}), "
                               f"respawning in {delay:g}s")
    mgr._pump(kind)
    mgr._flush()


def handle_message(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess, message: Any) -> None:
    """One line from a workflow worker. Anything unexpected is logged, never raised."""
    if worker is not kind.worker:
        return  # a retired worker's last words
    if isinstance(message, protocol.ThreadMessage):
        _on_thread_message(mgr, kind, worker, message)
    elif isinstance(message, protocol.ThreadEnd):
        _on_thread_end(mgr, kind, message)
    elif isinstance(message, protocol.Malformed):
        _unexpected(mgr, kind, worker, f"malformed line ({message.problem}): "
                                       f"{message.line.decode('utf-8', 'replace')[:200]}")
    elif not isinstance(message, protocol.Ready):
        _unexpected(mgr, kind, worker, f"unexpected message {message.type!r}")


def _unexpected(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess, what: str) -> None:
    mgr._system("error", {"workflow": kind.name, "error_type": "ProtocolError",
                          "message": f"workflow worker {kind.name} pid {worker.pid}: {what}"})
    mgr._flush()


def _on_thread_message(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess,
                       msg: protocol.ThreadMessage) -> None:
    thread = kind.running.get(msg.run_id)
    if thread is None or not thread.dispatched:
        _unexpected(mgr, kind, worker, f"message for {msg.run_id}, which it does not run")
        return
    if msg.seq != len(thread.messages):
        _unexpected(mgr, kind, worker, f"{msg.run_id}: message seq {msg.seq} out of order "
                                       f"(expected {len(thread.messages)})")
        return
    try:
        mgr._message(thread, msg.seq, msg.message)
    except ValueError as exc:
        _unexpected(mgr, kind, worker, f"{msg.run_id}: invalid message: {exc}")
        worker.send(protocol.ThreadCancel(msg.run_id, f"invalid message: {exc}"))
        return
    _ack(mgr, kind, worker, thread, msg.seq)


def _ack(mgr: WorkflowManager, kind: Kind, worker: WorkerProcess, thread: Thread, seq: int) -> None:
    """Acknowledge only once the message is on disk; retry the flush until it is."""
    if not mgr._flush():
        asyncio.get_running_loop().call_later(0.5, _ack, mgr, kind, worker, thread, seq)
        return
    kind.crashes = 0  # progress: the worker is healthy again
    worker.send(protocol.Ack(thread.run_id, seq))


def _on_thread_end(mgr: WorkflowManager, kind: Kind, msg: protocol.ThreadEnd) -> None:
    thread = kind.running.pop(msg.run_id, None)
    if thread is None:
        if kind.worker is not None:
            _unexpected(mgr, kind, kind.worker, f"thread_end for {msg.run_id}, which it does not run")
        return
    status, reason = msg.status, msg.reason
    if status not in END_STATUSES:
        status, reason = "failed", f"worker reported unknown status {msg.status!r}: {msg.reason}"
    payload: dict[str, Any] = {"reason": reason, "rounds": rounds_used(thread.messages)}
    if msg.error:
        payload["error"] = msg.error
    mgr._event(thread, status, payload)
    level = "info" if status == "completed" else "error"
    mgr.report(level, f"workflow {kind.name}: {thread.run_id} {status} ({reason}) "
                      f"after {payload['rounds']} rounds")
    mgr._pump(kind)
    mgr._flush()
