"""The WorkflowManager's worker side: spawn a workflow worker, hear it, notice when it dies.

Decisions live here (how many failed starts before giving up, what a death means
for running threads, what a worker's line means for its thread); the waits
(back-off, ready, TERM to KILL) are the one supervision `Policy`;
the process handle (`WorkerProcess`) only knows the child. `Spawner` writes
through the journal and tells the manager by its return values when there may
be room for the next thread; it never calls the manager.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import is_round
from nerve_cli.config.model import WorkflowConfig
from nerve_cli.errors import NerveError
from nerve_cli.kernel.core.causes import Cause
from nerve_cli.kernel.supervision.launch import PLAIN, Launch
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.process import WorkerProcess, start_worker, worker_argv
from nerve_cli.kernel.workflows import control, gates, pausing, recovery
from nerve_cli.kernel.workflows.journal import Journal, thread_cause
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.vocab import logrows
from nerve_cli.vocab.states import ThreadStatus, WorkerState
from nerve_cli.wire import protocol
from nerve_cli.words import plural

END_STATUSES = (ThreadStatus.COMPLETED, ThreadStatus.FAILED, ThreadStatus.WAITING)  # what a worker may report
OnMessage = Callable[[Kind, WorkerProcess, Any], None]
# Stores an event a thread's role emits: (channel, payload, key, cause) → (event id, duplicate, senses woken);
# raises NerveError for an event that cannot be stored as given (or is past its causal depth bound).
Emit = Callable[[str, Any, "str | None", "Cause | None"], Awaitable[tuple[int, bool, list[str]]]]


class Spawner:
    def __init__(self, home: Path, journal: Journal, policy: Policy, emit: Emit, *, max_crashes: int,
                 start_tries: int, launch: Launch = PLAIN) -> None:
        self.home = home
        self.launch = launch
        self.emit = emit
        self._emitting: set[asyncio.Task[None]] = set()
        self.journal = journal
        self.policy = policy  # back-off, ready and stop waits: the one supervision policy
        self.max_crashes = max_crashes
        self.start_tries = start_tries

    async def spawn(self, kind: Kind, on_message: OnMessage) -> WorkerProcess | None:
        """Start the kind's worker (after a backoff if it has been dying); None if it did not start or load.

        Either way the kind's threads have been dealt with; the caller serves them next.
        """
        delay = self.policy.backoff(kind.crashes)
        if delay:
            await asyncio.sleep(delay)
        stat = kind.file_stat(self.home)  # before the import: an edit after it means "try again"
        argv = worker_argv("workflow", "--name", kind.name, "--home", str(self.home))
        worker = start_worker(
            f"workflow={kind.name}", argv,
            on_message=lambda w, m: on_message(kind, w, m),
            on_stderr=lambda w, line: self.journal.report("info", f"workflow {kind.name} pid {w.pid}: {line}"),
            cwd=str(self.home),
            launch=self.launch,
        )
        kind.worker = worker
        try:
            await worker.start()
            ready = await worker.wait_ready(self.policy.ready_timeout)
        except (OSError, RuntimeError, TimeoutError) as exc:
            await self._start_failed(kind, worker, exc)
            return None
        if ready.failed:
            await self._load_failed(kind, worker, ready, stat)
            return None
        kind.state = WorkerState.READY
        self.journal.system(logrows.worker_started(kind.name, worker.pid, workflow=kind.name, start=worker.start_kind))
        return worker

    async def _start_failed(self, kind: Kind, worker: WorkerProcess, exc: BaseException) -> None:
        kind.crashes += 1
        if worker.alive:
            await worker.terminate(self.policy.term_wait)
        kind.worker, kind.state = None, WorkerState.STOPPED
        tail = " | ".join(list(worker.stderr_tail)[-3:])
        why = f"{exc}" + (f" (stderr: {tail})" if tail else "")
        self.journal.system(logrows.error(kind.name, f"workflow {kind.name}: worker did not start: {why}",
                                          workflow=kind.name, error_type="WorkerStartError"))
        if kind.crashes >= self.start_tries:
            recovery.fail_all(self.journal, kind,
                              f"workflow {kind.name}: its worker failed to start {kind.crashes} times: {why}")
            kind.crashes = 0

    async def _load_failed(self, kind: Kind, worker: WorkerProcess, ready: protocol.Ready,
                           stat: tuple[int, int] | None) -> None:
        info = ready.failed.get(kind.name) or next(iter(ready.failed.values()))
        if await worker.wait_exit(2.0) is None:
            await worker.terminate(self.policy.term_wait)
        kind.worker, kind.state = None, WorkerState.STOPPED
        kind.load_error = (stat, info)  # the manager's next pump fails the waiting threads with it
        self.journal.system(logrows.error(kind.name, f"workflow {kind.name} failed to load: {info.summary()}",
                                          workflow=kind.name, error_type=info.type, traceback=info.traceback,
                                          file=info.file, line=info.line))

    def died(self, kind: Kind, worker: WorkerProcess, cfg: WorkflowConfig | None) -> None:
        """The kind's worker exited without being asked: resume its threads (idempotent) or crash them."""
        kind.worker, kind.state = None, WorkerState.STOPPED
        kind.cancel_idle()
        exit_text = worker.describe_exit()
        self.journal.system(logrows.worker_exited(kind.name, worker.pid, workflow=kind.name, exit=exit_text,
                                                  threads=sorted(kind.running)))
        if not kind.running:
            return
        kind.crashes += 1
        reason = f"worker exited with {exit_text}"
        resume = cfg is not None and cfg.idempotent and kind.crashes <= self.max_crashes
        if cfg is not None and cfg.idempotent and not resume:
            reason += f" ({kind.crashes} times in a row without progress; not resumed again)"
            kind.crashes = 0
        recovery.lose_threads(self.journal, kind, reason, resume=resume)
        if kind.running:
            delay = self.policy.backoff(kind.crashes)
            self.journal.system(logrows.worker_respawn(kind.name, kind.crashes, delay))
            self.journal.report("warn", f"workflow {kind.name}: worker pid {worker.pid} died ({exit_text}), "
                                        f"respawning in {delay:g}s")

    # -- worker messages -------------------------------------------------------------
    def handle_message(self, kind: Kind, worker: WorkerProcess, message: Any) -> bool:
        """One line from a workflow worker; True when a thread ended or waits (room for the next).

        Anything unexpected is logged, never raised.
        """
        if worker is not kind.worker:
            return False  # a retired worker's last words
        if isinstance(message, protocol.ThreadMessage):
            self._on_thread_message(kind, worker, message)
        elif isinstance(message, protocol.RoleFailed):
            thread = kind.running.get(message.run_id)
            if thread is not None:
                self.journal.role_failed(thread, message.role, message.attempt, message.attempts, message.reason,
                                         message.retry_in_s, message.error)
        elif isinstance(message, protocol.ThreadEnd):
            return self._on_thread_end(kind, message)
        elif isinstance(message, protocol.ThreadEmit):
            task = asyncio.get_running_loop().create_task(self._emit(kind, worker, message))
            self._emitting.add(task)
            task.add_done_callback(self._emitting.discard)
        elif isinstance(message, protocol.Malformed):
            self._unexpected(kind, worker, f"malformed line ({message.problem}): "
                                           f"{message.line.decode('utf-8', 'replace')[:200]}")
        elif not isinstance(message, protocol.Ready):
            self._unexpected(kind, worker, f"unexpected message {message.type!r}")
        return False

    def _unexpected(self, kind: Kind, worker: WorkerProcess, what: str) -> None:
        self.journal.system(logrows.error(kind.name, f"workflow worker {kind.name} pid {worker.pid}: {what}",
                                          workflow=kind.name, error_type="ProtocolError"))
        self.journal.flush()

    def _on_thread_message(self, kind: Kind, worker: WorkerProcess, msg: protocol.ThreadMessage) -> None:
        thread = kind.running.get(msg.run_id)
        if thread is None or not thread.dispatched:
            self._unexpected(kind, worker, f"message for {msg.run_id}, which it does not run")
            return
        if msg.seq != len(thread.messages):
            self._unexpected(kind, worker, f"{msg.run_id}: message seq {msg.seq} out of order "
                                           f"(expected {len(thread.messages)})")
            return
        try:
            self.journal.message(thread, msg.seq, msg.message)
        except ValueError as exc:
            self._unexpected(kind, worker, f"{msg.run_id}: invalid message: {exc}")
            worker.send(protocol.ThreadCancel(msg.run_id, f"invalid message: {exc}"))
            return
        if thread.pausing is not None and is_round(msg.message.get("role")):
            # its round is over and on disk (with the status row that follows): the next one never begins
            worker.send(protocol.ThreadCancel(msg.run_id, pausing.PAUSE_REASON))
            return
        self._ack(kind, worker, thread, msg.seq)

    async def _emit(self, kind: Kind, worker: WorkerProcess, msg: protocol.ThreadEmit) -> None:
        """Store the event a thread's role emits and answer it; a refusal is the answer's `error`."""
        if msg.run_id not in kind.running:
            answer = protocol.EmitDone(msg.run_id, msg.request, error=f"{msg.run_id} is not running")
        else:
            try:
                thread = kind.running[msg.run_id]  # its emits are one deeper than it
                cause = thread_cause(thread.run_id, thread.workflow, thread.origin).hop(msg.channel)
                event_id, duplicate, woken = await self.emit(msg.channel, msg.payload, msg.key, cause)
                answer = protocol.EmitDone(msg.run_id, msg.request, event_id, duplicate, woken)
            except NerveError as exc:
                answer = protocol.EmitDone(msg.run_id, msg.request, error=str(exc))
        if worker is kind.worker:
            worker.send(answer)

    def _ack(self, kind: Kind, worker: WorkerProcess, thread: Thread, seq: int) -> None:
        """Acknowledge only once the message is on disk; retry the flush until it is."""
        if not self.journal.flush():
            asyncio.get_running_loop().call_later(0.5, self._ack, kind, worker, thread, seq)
            return
        kind.crashes = 0  # progress: the worker is healthy again
        worker.send(protocol.Ack(thread.run_id, seq))

    def _on_thread_end(self, kind: Kind, msg: protocol.ThreadEnd) -> bool:
        thread = kind.running.pop(msg.run_id, None)
        if thread is None:
            if kind.worker is not None:
                self._unexpected(kind, kind.worker, f"thread_end for {msg.run_id}, which it does not run")
            return False
        reason = msg.reason
        if isinstance(msg.status, ThreadStatus) and msg.status in END_STATUSES:
            status = msg.status
        else:
            status, reason = ThreadStatus.FAILED, f"worker reported unknown status {msg.status!r}: {msg.reason}"
        if thread.cancelling is not None and status is not ThreadStatus.COMPLETED:  # it stopped as asked
            control.cancelled(self.journal, kind, thread, ThreadStatus.STARTED, *thread.cancelling)
            return True
        if thread.pausing is not None and status is not ThreadStatus.COMPLETED:  # it let go after its round
            pausing.park(self.journal, kind, thread, ThreadStatus.STARTED, *thread.pausing)
            return True
        if status is ThreadStatus.WAITING:
            gates.wait(self.journal, kind, thread)
            return True
        payload: dict[str, Any] = {"reason": reason, "rounds": thread.rounds}
        if msg.error:
            payload["error"] = msg.error
        self.journal.status(thread, status, **payload)
        level = "info" if status is ThreadStatus.COMPLETED else "error"
        self.journal.report(level, f"workflow {kind.name}: {thread.run_id} {status} ({reason}) "
                                   f"after {plural(payload['rounds'], 'round')}")
        return True
