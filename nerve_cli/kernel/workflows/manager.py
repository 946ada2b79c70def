"""WorkflowManager: the kernel's side of workflows (launch, concurrency, persistence, recovery).

Every state change is a `workflow` log row (with the workflow_runs upsert in the
same flush): queued → started → message… → completed | failed | crashed, or
dropped. A thread's messages are flushed to disk before the worker is told it
may take its next step (Ack), so a crash loses nothing that a later step used.

Per workflow kind there is at most one worker process, spawned when a thread
starts and stopped after `idle_timeout` without threads. When a worker dies
mid-thread it is respawned with backoff; idempotent threads resume from their
persisted chain, the others end `crashed` with the exit as the reason.

A thread whose role asked a person is `waiting`: it holds no slot, survives
restarts, and resumes (queued again) when a person answers.

The manager owns the kinds and the pump (start what may start, make sure a
worker serves it). It calls down into one owner per decision, none of which
calls back: `workflow_admission` (may it run; start, queue or drop),
`workflow_spawn` (the worker's life and what its lines mean),
`workflow_recovery` (threads whose worker, file or time ran out),
`workflow_gates` (threads waiting for a person). They all write through
`workflow_journal`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nerve_cli.automaton.directive import parse_directive
from nerve_cli.automaton.model import start_message
from nerve_cli.config.model import NerveConfig, WorkflowConfig, format_duration
from nerve_cli.errors import WorkflowError
from nerve_cli.kernel.core.report import Report
from nerve_cli.kernel.supervision.launch import PLAIN, Launch
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.process import WorkerProcess
from nerve_cli.kernel.workflows import admission, gates, recovery
from nerve_cli.kernel.workflows.journal import Journal, Listener
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.kernel.workflows.spawn import Spawner
from nerve_cli.store.logs import LogStore, now_ms, workflow_runs
from nerve_cli.store.runs import run_counts
from nerve_cli.vocab import logrows
from nerve_cli.vocab.states import ThreadStatus, WorkerState
from nerve_cli.wire import protocol

log = logging.getLogger(__name__)


class WorkflowManager:
    def __init__(
        self,
        home: Path,
        config: NerveConfig,
        logs: LogStore,
        report: Report,
        *,
        idle_timeout: float = 30.0,
        policy: Policy | None = None,
        max_crashes: int = 5,
        start_tries: int = 3,
        launch: Launch = PLAIN,
    ) -> None:
        self.home = Path(home)
        self.config = config
        self.logs = logs
        self.report = report
        self.idle_timeout = idle_timeout
        self.kinds: dict[str, Kind] = {}
        self.journal = Journal(logs, report)
        self._own_policy = policy is not None  # a caller's policy stays; else nerve.yaml's, kept current
        self.spawner = Spawner(self.home, self.journal, policy or Policy.of(config.engine),
                               max_crashes=max_crashes, start_tries=start_tries, launch=launch)
        self.stopping = False
        self._tasks: set[asyncio.Task[None]] = set()  # background tasks, referenced until done

    # -- public API ------------------------------------------------------------
    async def start(self) -> None:
        """Crash recovery at engine start: resume or crash `started` threads, requeue `queued` ones,
        wait on with `waiting` ones (their approval_timeout counts from when they began to wait)."""
        self._flush()
        for row in workflow_runs(self.logs.path, status="started"):
            self._requeue(recovery.recover_started(self.journal, self.config.workflows.get(row["workflow"]), row))
        for row in workflow_runs(self.logs.path, status="queued"):
            self._requeue(recovery.recover_queued(self.journal, self.config.workflows.get(row["workflow"]), row))
        for row in workflow_runs(self.logs.path, status=gates.WAITING):
            self._rewait(row)
        for kind in list(self.kinds.values()):
            self._pump(kind)
        self._flush()

    def launch(self, workflow: str, prompt: str, max_rounds: int | None, origin: dict) -> dict:
        """Queue a thread and start it if there is room; raises WorkflowError for a bad request."""
        cfg, rounds = admission.check_request(self.config, workflow, prompt, max_rounds)
        kind = self._kind(workflow)
        thread = Thread(self.logs.allocate_run_id(), workflow, prompt, rounds, dict(origin or {}))
        payload: dict[str, Any] = {"prompt": prompt, "max_rounds": rounds, "origin": thread.origin}
        if max_rounds is not None and max_rounds > rounds:
            payload["requested_max_rounds"] = max_rounds
        self.journal.status(thread, ThreadStatus.QUEUED, **payload)
        status = admission.admit(self.journal, kind, cfg, thread, holding=self.stopping)
        if status == admission.STARTED:
            self._begin(kind, thread)
            self._pump(kind)
        self._flush()
        self.report("info", f"workflow {workflow}: {thread.run_id} {status}")
        return {"run_id": thread.run_id, "status": status}

    def launch_directive(self, sense: str, directive: str) -> dict:
        """Launch from a sense's `workflow` directive: {"run_id", "status"} (started, queued, dropped), or
        {"run_id": None, "status": "refused", "reason"}. A refusal is also logged (naming the sense), never raised."""
        try:
            parsed = parse_directive(directive)
            return self.launch(parsed.workflow, parsed.prompt, parsed.max_rounds,
                               {"kind": "directive", "sense": sense})
        except WorkflowError as exc:
            why = str(exc)
        except Exception as exc:  # never let a sense's directive hurt the kernel
            log.exception("launch_directive failed")
            why = f"{type(exc).__name__}: {exc}"
        message = f"sense {sense}: workflow directive refused: {why}"
        self.logs.write(logrows.error(sense, message, sense=sense, error_type="WorkflowError",
                                      directive=str(directive)[:500]))
        self._flush()
        self.report("error", message)
        return {"run_id": None, "status": "refused", "reason": why}

    def update_config(self, config: NerveConfig) -> None:
        """New settings apply to the next start; queued threads of a removed workflow are dropped."""
        self.config = config
        if not self._own_policy:
            self.spawner.policy = Policy.of(config.engine)
        for kind in self.kinds.values():
            if kind.name not in config.workflows:
                while kind.queue:
                    self.journal.status(kind.queue.popleft(), ThreadStatus.DROPPED,
                                        reason=f"workflow {kind.name} was removed from nerve.yaml")
            self._pump(kind)
        self._flush()

    def status(self) -> dict:
        counts = run_counts(self.logs.path)
        out = {}
        for name, cfg in self.config.workflows.items():
            kind = self.kinds.get(name)
            worker = kind.worker if kind else None
            out[name] = {
                "enabled": cfg.enabled, "concurrency": cfg.concurrency, "overflow": cfg.overflow,
                "max_queue": cfg.max_queue, "idempotent": cfg.idempotent,
                "worker": {"pid": worker.pid if worker else None, "state": kind.state if kind else WorkerState.STOPPED},
                "running": sorted(kind.running, key=_num) if kind else [],
                "queued": [t.run_id for t in kind.queue] if kind else [],
                "waiting": sorted(kind.waiting, key=_num) if kind else [],
                "counts": counts.get(name, {}),
            }
        return out

    def oldest_waiting(self) -> dict[str, int | None]:
        """workflow → since when (unix ms) its longest-waiting thread has waited for a person; None: none waits."""
        out: dict[str, int | None] = {}
        for name in self.config.workflows:
            kind = self.kinds.get(name)
            since = [t.waiting_since for t in kind.waiting.values() if t.waiting_since is not None] if kind else []
            out[name] = min(since) if since else None
        return out

    def cancel(self, run_id: str, reason: str) -> bool:
        """Cancel a thread: a queued one is dropped, a running or waiting one ends `failed` ("cancelled: reason")."""
        for kind in self.kinds.values():
            waiting = kind.waiting.get(run_id)
            if waiting is not None:
                gates.expire(self.journal, kind, waiting, f"cancelled: {reason}")
                self._flush()
                return True
            for thread in list(kind.queue):
                if thread.run_id == run_id:
                    kind.queue.remove(thread)
                    self.journal.status(thread, ThreadStatus.DROPPED, reason=f"cancelled: {reason}")
                    self._flush()
                    return True
            running = kind.running.get(run_id)
            if running is not None:
                thread = running
                if thread.dispatched and kind.worker is not None:
                    kind.worker.send(protocol.ThreadCancel(run_id, reason))
                else:  # not on a worker yet: end it here
                    del kind.running[run_id]
                    self.journal.status(thread, ThreadStatus.FAILED, reason=f"cancelled: {reason}", rounds=0)
                    self._pump(kind)
                    self._flush()
                return True
        return False

    def answer(self, run_id: str, decision: str, note: str | None, by: str, via: str | None = None) -> dict:
        """A person's answer to a waiting thread: appended to its chain, the thread resumes (or queues).

        WorkflowError when the thread is not waiting. An answered thread is
        never dropped by `overflow: drop`: it waits at the head of the queue.
        """
        kind, thread = self._waiting(run_id)
        cfg = self.config.workflows.get(kind.name)
        if cfg is None:
            raise WorkflowError(f"{run_id} cannot resume: workflow {kind.name} is no longer in nerve.yaml")
        try:
            gates.answer(self.journal, kind, thread, decision, note, by, via)
        except ValueError as exc:
            raise WorkflowError(str(exc)) from None
        kind.queue.appendleft(thread)  # it was asked before anything queued now: first in line
        self._pump(kind)  # starts it at once if there is a free slot
        self._flush()
        status = "started" if thread.run_id in kind.running else "queued"
        self.report("info", f"workflow {kind.name}: {run_id} {decision}d by {by}; {status}")
        return {"run_id": run_id, "decision": decision, "status": status}

    def _waiting(self, run_id: str) -> tuple[Kind, Thread]:
        for kind in self.kinds.values():
            if run_id in kind.waiting:
                return kind, kind.waiting[run_id]
        self._flush()
        rows = [r for r in workflow_runs(self.logs.path) if r["run_id"] == run_id]
        raise gates.not_waiting(self.logs.path, run_id, rows[0]["status"] if rows else None)

    def _rewait(self, row: dict) -> None:
        """A thread that was waiting when the engine stopped waits on (or fails: its workflow is gone)."""
        try:
            thread = gates.waiting_thread(self.logs.path, row)
        except WorkflowError as exc:
            self.logs.write(logrows.thread_status(row["run_id"], row["workflow"], ThreadStatus.FAILED, reason=str(exc)))
            return
        if row["workflow"] not in self.config.workflows:
            self.journal.status(thread, ThreadStatus.FAILED,
                                reason=f"workflow {row['workflow']} is no longer in nerve.yaml",
                                rounds=thread.rounds)
            return
        kind = self._kind(thread.workflow)
        kind.waiting[thread.run_id] = thread
        self._arm_gate(kind, thread)

    def _arm_gate(self, kind: Kind, thread: Thread) -> None:
        deadline = gates.approval_deadline(self.config.workflows.get(kind.name), thread)
        if deadline is not None and thread.timer is None:
            thread.timer = asyncio.get_running_loop().call_later(deadline[0], self._expire, kind, thread,
                                                                 deadline[1])

    def _expire(self, kind: Kind, thread: Thread, reason: str) -> None:
        thread.timer = None
        if gates.expire(self.journal, kind, thread, reason):
            self._flush()

    def add_listener(self, listener: Listener) -> None:
        """Called after every workflow event is written (the standalone CLI prints rounds with it)."""
        self.journal.listeners.append(listener)

    async def stop(self, timeout: float, reason: str = "engine stopped") -> None:
        """Let running threads finish up to `timeout`; then idempotent ones stay `started`
        (resumed at the next start), the others end `crashed` with `reason`."""
        self.stopping = True
        await self._wait(lambda: not any(k.running for k in self.kinds.values()), timeout)
        for kind in self.kinds.values():
            recovery.abandon(self.journal, kind, self.config.workflows.get(kind.name), reason)
            await self._retire(kind)
        self._flush()

    async def reload(self, workflow: str) -> None:
        """The workflow's file changed: drain its threads (up to drain_timeout), restart its worker.

        Threads still running after the drain follow the crash rule: idempotent
        ones resume on the new worker, the others end `crashed`.
        """
        kind = self.kinds.get(workflow)
        if kind is None:
            return
        cfg = self.config.workflows.get(workflow) or WorkflowConfig()
        kind.draining = True
        try:
            await self._wait(lambda: not kind.running, cfg.drain_timeout)
            reason = f"workflow file changed; thread not finished within drain_timeout {format_duration(cfg.drain_timeout)}"
            recovery.lose_threads(self.journal, kind, reason, resume=cfg.idempotent)
            await self._retire(kind)
            kind.load_error = None
        finally:
            kind.draining = False
        self._pump(kind)
        self._flush()

    # -- starting threads -------------------------------------------------------
    def _begin(self, kind: Kind, thread: Thread, **detail: Any) -> None:
        """Mark a thread started (its start message is seq 0) and count it as running."""
        if not thread.messages:
            first = start_message(thread.prompt, thread.max_rounds, now_ms()).to_dict()
            self.journal.status(thread, ThreadStatus.STARTED, max_rounds=thread.max_rounds, **detail)
            self.journal.message(thread, 0, first)
        else:
            self.journal.status(thread, ThreadStatus.STARTED, resumed=True, rounds=thread.rounds,
                                **detail)
        thread.dispatched = False
        kind.running[thread.run_id] = thread
        kind.cancel_idle()
        if thread.started_ms is None:
            thread.started_ms = now_ms()
        deadline = recovery.thread_deadline(self.config.workflows.get(kind.name), thread)
        if deadline is not None:
            thread.run_timer = asyncio.get_running_loop().call_later(deadline[0], self._time_out, kind, thread,
                                                                     deadline[1])

    def _time_out(self, kind: Kind, thread: Thread, reason: str) -> None:
        if recovery.time_out(self.journal, kind, thread, reason):
            self._pump(kind)
            self._flush()

    def _pump(self, kind: Kind) -> None:
        """Start queued threads while there is room, and make sure a worker serves the running ones."""
        cfg = self.config.workflows.get(kind.name)
        while True:
            while (thread := admission.next_queued(kind, cfg, holding=self.stopping)) is not None:
                self._begin(kind, thread)
            if kind.running and recovery.fail_if_broken(self.journal, kind, self.home):
                continue
            if not self._ensure_worker(kind):  # True: a thread could not be handed over and ended: room
                break
        self._maybe_idle(kind)

    # -- workers -----------------------------------------------------------------
    def _ensure_worker(self, kind: Kind) -> bool:
        """Hand the running threads to a ready worker, or start one; True when a thread ended instead."""
        if not kind.running:
            return False
        if kind.state is WorkerState.READY:
            ended = False
            for thread in list(kind.running.values()):  # a thread that cannot be handed over leaves `running`
                if not thread.dispatched and not self._dispatch(kind, thread):
                    ended = True
            return ended
        if kind.state is WorkerState.STOPPED:
            kind.state = WorkerState.STARTING
            kind.spawn_task = asyncio.get_running_loop().create_task(self._spawn(kind))
        return False

    def _dispatch(self, kind: Kind, thread: Thread) -> bool:
        """Send the thread (its whole chain) to the worker; False when the chain is too long to send: it failed."""
        assert kind.worker is not None
        cfg = self.config.workflows.get(kind.name) or WorkflowConfig()
        start = protocol.ThreadStart(thread.run_id, thread.workflow, list(thread.messages), thread.max_rounds,
                                     cfg.role_timeout, cfg.role_retries, cfg.role_backoff, cfg.model, cfg.system)
        line = start.encode()
        if len(line) > protocol.MAX_LINE:  # the worker would drop the line and the thread would wait for ever
            recovery.fail_unsendable(self.journal, kind, thread, len(line))
            return False
        thread.dispatched = kind.worker.send_line(line)
        return True

    async def _spawn(self, kind: Kind) -> None:
        worker = await self.spawner.spawn(kind, self._on_message)
        if worker is not None:
            self.background(self._watch(kind, worker))
        self._pump(kind)  # serves the threads, or fails them with the load error
        self._flush()

    async def _watch(self, kind: Kind, worker: WorkerProcess) -> None:
        """Wait for the worker to exit; an exit we did not ask for is a crash."""
        await worker.wait_exit()
        if worker is not kind.worker:
            return  # retired on purpose (idle, reload, shutdown)
        self.spawner.died(kind, worker, self.config.workflows.get(kind.name))
        self._pump(kind)
        self._flush()

    def _on_message(self, kind: Kind, worker: WorkerProcess, message: Any) -> None:
        if self.spawner.handle_message(kind, worker, message):  # a thread ended or waits: room for the next
            for thread in kind.waiting.values():
                self._arm_gate(kind, thread)
            self._pump(kind)
            self._flush()

    def _maybe_idle(self, kind: Kind) -> None:
        if kind.running or kind.queue or kind.state is not WorkerState.READY or kind.idle is not None:
            return
        loop = asyncio.get_running_loop()
        kind.idle = loop.call_later(self.idle_timeout, lambda: self.background(self._stop_idle(kind)))

    async def _stop_idle(self, kind: Kind) -> None:
        kind.idle = None
        if kind.running or kind.queue or kind.state is not WorkerState.READY:
            return
        await self._retire(kind)
        self._pump(kind)  # a thread that arrived meanwhile gets a fresh worker

    async def _retire(self, kind: Kind) -> None:
        """Stop the kind's worker on purpose (its exit is not a crash)."""
        kind.cancel_idle()
        if kind.spawn_task is not None and not kind.spawn_task.done():
            kind.spawn_task.cancel()
            await asyncio.gather(kind.spawn_task, return_exceptions=True)
        worker, kind.worker = kind.worker, None
        kind.state = WorkerState.STOPPING
        if worker is not None:
            await worker.stop(2.0)
            self.journal.system(logrows.worker_exited(kind.name, worker.pid, workflow=kind.name,
                                                      exit=worker.describe_exit(), expected=True))
        kind.state = WorkerState.STOPPED
        self._flush()

    # -- helpers -------------------------------------------------------------------------
    def background(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _kind(self, name: str) -> Kind:
        if name not in self.kinds:
            self.kinds[name] = Kind(name)
        return self.kinds[name]

    def _requeue(self, thread: Thread | None) -> None:
        if thread is not None:
            self._kind(thread.workflow).queue.append(thread)

    def _flush(self) -> bool:
        return self.journal.flush()

    async def _wait(self, condition: Callable[[], bool], timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)


def _num(run_id: str) -> int:
    tail = run_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
