"""WorkflowManager: the kernel's side of workflows (launch, concurrency, persistence, recovery).

Every state change is a `workflow` log row (with the workflow_runs upsert in the
same flush): queued → started → message… → completed | failed | crashed, or
dropped. A thread's messages are flushed to disk before the worker is told it
may take its next step (Ack), so a crash loses nothing that a later step used.

Per workflow kind there is at most one worker process, spawned when a thread
starts and stopped after `idle_timeout` without threads. When a worker dies
mid-thread it is respawned with backoff; idempotent threads resume from their
persisted chain, the others end `crashed` with the exit as the reason.

A thread whose role asked a person or waits for an event is `waiting`: it holds
no slot, survives restarts, and resumes (queued again) when a person answers
or a matching event is committed (`waits` reads the event store).

The manager owns the kinds and the pump (start what may start, make sure a
worker serves it). It calls down into one owner per decision, none of which
calls back: `admission` (may it run; start, queue or drop), `spawn` (the
worker's life and what its lines mean), `recovery` (threads whose worker, file
or time ran out), `gates` (waiting threads), `waits` (which event resumes a
thread waiting for one). They all write through `journal`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nerve_cli.automaton.directive import parse_directive
from nerve_cli.automaton.model import WorkflowMessage, start_message
from nerve_cli.automaton.waits import EventWait, TimeWait, event_message, slept_message, timeout_message
from nerve_cli.config.fleet import emit_refusal
from nerve_cli.config.launch import thread_key
from nerve_cli.config.model import NerveConfig, WorkflowConfig, format_duration
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.kernel.core.causes import Cause
from nerve_cli.kernel.core.priority import URGENT
from nerve_cli.kernel.core.report import Report
from nerve_cli.kernel.supervision.launch import PLAIN, Launch
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.process import WorkerProcess
from nerve_cli.kernel.workflows import admission, control, gates, pausing, recovery
from nerve_cli.kernel.workflows.journal import Journal, Listener
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.kernel.workflows.spawn import Emit, Spawner
from nerve_cli.kernel.workflows.waits import EventWaits, Found, Waiter
from nerve_cli.store import answers
from nerve_cli.store.events import EventError, store_event
from nerve_cli.store.logs import LogStore, now_ms, workflow_runs
from nerve_cli.store.runs import run_counts
from nerve_cli.store.thread_control import rerun_of
from nerve_cli.vocab import logrows, states
from nerve_cli.vocab.sources import SourceKind
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
        emit: Emit | None = None,
        on_statuses: Callable[[], None] | None = None,
    ) -> None:
        """`emit` stores an event a thread's role emits (the engine's durable emit); without one (a
        standalone run) the event is stored in data/events.db for the next engine to deliver.
        `on_statuses` is called once thread status rows are on disk (the engine signals them)."""
        self.home = Path(home)
        self.config = config
        self.logs = logs
        self.report = report
        self.idle_timeout = idle_timeout
        self.kinds: dict[str, Kind] = {}
        self.journal = Journal(logs, report, on_statuses)
        self._own_policy = policy is not None  # a caller's policy stays; else nerve.yaml's, kept current
        self._emit = emit or self._store_event
        self.spawner = Spawner(self.home, self.journal, policy or Policy.of(config.engine), self._thread_emit,
                               max_crashes=max_crashes, start_tries=start_tries, launch=launch)
        self.stopping = False
        self.event_waits = EventWaits(Layout(self.home).data, self._event_arrived)
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
        for row in workflow_runs(self.logs.path, status=pausing.PAUSED):
            self._repause(row)
        for kind in list(self.kinds.values()):
            self._pump(kind)
        self._flush()

    def launch(self, workflow: str, prompt: str, max_rounds: int | None, origin: dict,
               chain: list[WorkflowMessage] | None = None) -> dict:
        """Queue a thread and start it if there is room; raises WorkflowError for a bad request.

        `chain`: the messages it starts from (a fork of another thread), written with its `queued` row so
        that it survives a restart while queued; its start message then carries the rounds it gets."""
        cfg, rounds = admission.check_request(self.config, workflow, prompt, max_rounds)
        kind = self._kind(workflow)
        thread = Thread(self.logs.allocate_run_id(), workflow, prompt, rounds, dict(origin or {}))
        # a directive's thread takes its workflow's priority; one a person or an agent asked for goes first
        thread.priority = cfg.priority if thread.origin.get("kind") == "directive" else URGENT
        thread.key = thread_key(cfg, prompt, thread.origin)
        payload: dict[str, Any] = {"prompt": prompt, "max_rounds": rounds, "origin": thread.origin,
                                   "priority": thread.priority, **({"key": thread.key} if thread.key else {})}
        if max_rounds is not None and max_rounds > rounds:
            payload["requested_max_rounds"] = max_rounds
        self.journal.status(thread, ThreadStatus.QUEUED, **payload)
        for seq, message in enumerate(chain or []):
            meta = {**message.meta, "maxRounds": rounds} if seq == 0 else dict(message.meta)
            self.journal.message(thread, seq, {**message.to_dict(), "meta": meta})
        if thread.key is not None and cfg.key_overflow == "replace":
            self._supersede(kind, thread)
        status = admission.admit(self.journal, kind, cfg, thread, holding=self.stopping)
        if status == admission.STARTED:
            self._begin(kind, thread)
            self._pump(kind)
        self._flush()
        self.report("info", f"workflow {workflow}: {thread.run_id} {status}")
        return {"run_id": thread.run_id, "status": status}

    def _supersede(self, kind: Kind, thread: Thread) -> None:
        """`key_overflow: replace`: every live thread holding the new one's key is cancelled (a running one once
        its role stops: the new one waits for that)."""
        mates = [t.run_id for group in (kind.running, kind.waiting, kind.paused) for t in group.values()
                 if t.key == thread.key] + [t.run_id for t in kind.queue if t.key == thread.key]
        for run_id in mates:
            self.cancel(run_id, f"superseded by {thread.run_id}", "nerve", f"concurrency_key {thread.key}")

    def rerun(self, run_id: str, from_round: int | None, message: str | None, by: str,
              via: str | None = None) -> dict:
        """A new thread from `run_id`: the same workflow, prompt and limits, or (`from_round`) its chain up to
        that round, the last message kept edited to `message`. {"run_id", "status", "rerun_of"}."""
        self._flush()
        record, chain, origin = rerun_of(self.home, run_id, from_round, message, by, via)
        started = self.launch(record.workflow, record.prompt, record.max_rounds, origin, chain)
        return {**started, "rerun_of": run_id}

    def launch_directive(self, sense: str, directive: str, cause: Cause | None = None) -> dict:
        """Launch from a sense's `workflow` directive: {"run_id", "status"} (started, queued, dropped), or
        {"run_id": None, "status": "refused", "reason"}. A refusal is also logged (naming the sense), never raised.
        `cause`: the thread's causal depth and path (kept in its origin: its transitions are one deeper)."""
        try:
            parsed = parse_directive(directive)
            origin: dict[str, Any] = {"kind": "directive", "sense": sense}
            if cause is not None:
                origin["cause"] = cause.to_json()
            return self.launch(parsed.workflow, parsed.prompt, parsed.max_rounds, origin)
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
            kind.queue.ageing = config.engine.priority_ageing
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
                "queued_priority": [t.priority for t in kind.queue] if kind else [],
                "priority": cfg.priority,
                "waiting": sorted(kind.waiting, key=_num) if kind else [],
                "paused": sorted(kind.paused, key=_num) if kind else [],
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

    def cancel(self, run_id: str, reason: str | None, by: str, via: str | None = None) -> dict:
        """Cancel a live thread: {"run_id", "status": cancelled|cancelling, "was"}; WorkflowError otherwise.

        Queued or waiting: it ends `cancelled` now. Running: its role is cancelled on its worker (the thread
        ends `cancelled` when the worker says so), and after `cancel_grace` the kernel ends it itself.
        """
        why = reason or f"cancelled by {by}"
        for kind in self.kinds.values():
            thread = kind.waiting.pop(run_id, None)
            was = ThreadStatus.WAITING
            if thread is None and run_id in kind.paused:
                thread, was = kind.paused.pop(run_id), ThreadStatus.PAUSED
            if thread is None:
                thread = next((t for t in kind.queue if t.run_id == run_id), None)
                was = ThreadStatus.QUEUED
                if thread is not None:
                    kind.queue.remove(thread)
            if thread is not None:
                self.event_waits.remove(run_id)
                control.cancelled(self.journal, kind, thread, was, why, by, via)
                self._flush()
                return {"run_id": run_id, "status": ThreadStatus.CANCELLED.value, "was": was.value}
            thread = kind.running.get(run_id)
            if thread is not None:
                return self._cancel_running(kind, thread, why, by, via)
        self._flush()
        raise control.not_cancellable(self.logs.path, run_id)

    def _cancel_running(self, kind: Kind, thread: Thread, why: str, by: str, via: str | None) -> dict:
        if not thread.dispatched or kind.worker is None:  # not on a worker yet: it ends here
            del kind.running[thread.run_id]
            control.cancelled(self.journal, kind, thread, ThreadStatus.STARTED, why, by, via)
            self._pump(kind)
            self._flush()
            return {"run_id": thread.run_id, "status": ThreadStatus.CANCELLED.value, "was": "started"}
        if thread.cancelling is None:
            thread.cancelling = (why, by, via)
            kind.worker.send(protocol.ThreadCancel(thread.run_id, why))
            grace = (self.config.workflows.get(kind.name) or WorkflowConfig()).cancel_grace
            thread.cancel_timer = asyncio.get_running_loop().call_later(grace, self._cancel_overdue, kind, thread,
                                                                        grace)
        return {"run_id": thread.run_id, "status": "cancelling", "was": "started"}

    def _cancel_overdue(self, kind: Kind, thread: Thread, grace: float) -> None:
        """A cancelled thread's role did not stop within cancel_grace: end it here, stop the worker."""
        thread.cancel_timer = None
        if kind.running.get(thread.run_id) is not thread or thread.cancelling is None:
            return
        del kind.running[thread.run_id]
        why, by, via = thread.cancelling
        control.cancelled(self.journal, kind, thread, ThreadStatus.STARTED,
                          f"{why} (its role did not stop within cancel_grace {format_duration(grace)}: "
                          "its worker was stopped)", by, via)
        self._flush()
        if kind.worker is not None:
            self.background(self._stop_stuck(kind, kind.worker, f"{why}: its worker was stopped"))

    async def _stop_stuck(self, kind: Kind, worker: WorkerProcess, reason: str) -> None:
        """Stop a worker whose role would not stop. Nothing new is handed to it meanwhile (a thread started
        now waits for the next worker instead of dying with this one); once it is gone, the threads it still
        ran are lost with it, as when a worker dies: idempotent ones resume, the others crash."""
        kind.cancel_idle()
        kind.worker, kind.state = None, WorkerState.STOPPING  # its exit is ours, not a crash (`_watch`)
        await worker.terminate(1.0)
        self.journal.system(logrows.worker_exited(kind.name, worker.pid, workflow=kind.name,
                                                  exit=worker.describe_exit(), expected=True))
        cfg = self.config.workflows.get(kind.name)
        recovery.lose_threads(self.journal, kind, reason, resume=cfg is not None and cfg.idempotent)
        kind.state = WorkerState.STOPPED
        self._pump(kind)
        self._flush()

    def pause(self, run_id: str, by: str, via: str | None = None) -> dict:
        """Pause a live thread: {"run_id", "status": paused|pausing, "was"}; WorkflowError otherwise.

        Queued or waiting: paused now. Running: paused once its running round's message is on disk
        (`pausing` until then; a round that ends the thread ends it)."""
        for kind in self.kinds.values():
            if run_id in kind.paused:
                break
            thread, was = kind.waiting.pop(run_id, None), ThreadStatus.WAITING
            if thread is not None:
                self.event_waits.remove(run_id)
            else:
                thread, was = next((t for t in kind.queue if t.run_id == run_id), None), ThreadStatus.QUEUED
                if thread is not None:
                    kind.queue.remove(thread)
            if thread is None and run_id in kind.running:
                thread, was = kind.running[run_id], ThreadStatus.STARTED
                if thread.dispatched and kind.worker is not None:  # its round finishes first (`spawn`)
                    thread.pausing = (by, via)
                    return {"run_id": run_id, "status": "pausing", "was": was.value}
                del kind.running[run_id]
            if thread is not None:
                pausing.park(self.journal, kind, thread, was, by, via)
                self._pump(kind)
                self._flush()
                return {"run_id": run_id, "status": pausing.PAUSED.value, "was": was.value}
        self._flush()
        raise pausing.not_pausable(self.logs.path, run_id, resume=False)

    def resume(self, run_id: str, by: str, via: str | None = None) -> dict:
        """Resume a paused thread: {"run_id", "status": started|queued|waiting}; WorkflowError otherwise."""
        kind = next((k for k in self.kinds.values() if run_id in k.paused), None)
        if kind is None:
            self._flush()
            raise pausing.not_pausable(self.logs.path, run_id, resume=True)
        if kind.name not in self.config.workflows:
            raise WorkflowError(f"{run_id} cannot resume: workflow {kind.name} is no longer in nerve.yaml")
        thread = kind.paused[run_id]
        if pausing.unpark(self.journal, kind, thread, by, via) is ThreadStatus.WAITING:
            self._watch_wait(kind, thread)  # an event it matched while paused resumes it now
        else:
            kind.queue.appendleft(thread)  # it had its turn before the pause: first in line
            self._pump(kind)
        self._flush()
        status = ("started" if run_id in kind.running else "queued" if thread in kind.queue
                  else ThreadStatus.WAITING.value if run_id in kind.waiting else "queued")
        self.report("info", f"workflow {kind.name}: {run_id} resumed by {by}; {status}")
        return {"run_id": run_id, "status": status}

    def answer(self, given: answers.Answer) -> dict:
        """A person's answer to a waiting thread (`store.answers`, the one answer path): its votes appended to
        the chain; once every open question is settled the thread resumes (or queues).

        WorkflowError when the thread is not waiting or the answer cannot be taken. An answered thread is
        never dropped by `overflow: drop`: it waits at the head of the queue.
        """
        kind, thread = self._waiting(given.run_id)
        cfg = self.config.workflows.get(kind.name)
        if cfg is None:
            raise WorkflowError(f"{given.run_id} cannot resume: workflow {kind.name} is no longer in nerve.yaml")
        try:
            done = gates.answer(self.journal, kind, thread, given, cfg)
        except ValueError as exc:
            raise WorkflowError(str(exc)) from None
        if done.resumes:
            kind.queue.appendleft(thread)  # it was asked before anything queued now: first in line
            self._pump(kind)  # starts it at once if there is a free slot
        self._flush()
        status = ("started" if thread.run_id in kind.running else "queued") if done.resumes else "waiting"
        verb = "approved" if given.decision == states.Decision.APPROVE else "rejected"
        self.report("info", f"workflow {kind.name}: {given.run_id} {' '.join(done.answered)} {verb} by "
                            f"{given.by}; {status}")
        return {**done.to_json(), "status": status}

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
        self._watch_wait(kind, thread)

    def _repause(self, row: dict) -> None:
        """A thread that was paused when the engine stopped stays paused (its workflow may have gone since:
        resuming it then says so)."""
        try:
            thread = pausing.paused_thread(self.logs.path, row)
        except WorkflowError as exc:
            self.journal.status(Thread(row["run_id"], row["workflow"], "", 1, {}), ThreadStatus.FAILED,
                                reason=str(exc))
            return
        self._kind(thread.workflow).paused[thread.run_id] = thread

    def _watch_wait(self, kind: Kind, thread: Thread) -> None:
        """Arm what ends the thread's wait: its timeout, and for an event wait, reading its source."""
        if thread.timer is None:
            deadline = gates.deadline(self.config.workflows.get(kind.name), thread)
            if deadline is not None:
                thread.timer = asyncio.get_running_loop().call_later(deadline[0], self._timed_out, kind, thread,
                                                                     deadline[1])
        if isinstance(thread.wait, EventWait) and thread.run_id not in self._event_waiters():
            self.event_waits.add(Waiter(kind, thread, thread.wait, self.config.source_kind(thread.wait.source)))

    def _event_waiters(self) -> set[str]:
        return {run_id for waiters in self.event_waits.by_source.values() for run_id in waiters}

    def _timed_out(self, kind: Kind, thread: Thread, reason: str) -> None:
        """A wait's time ran out: a person's fails the thread (approval_timeout), an event's resumes it."""
        thread.timer = None
        wait = thread.wait
        if isinstance(wait, EventWait):
            self.event_waits.remove(thread.run_id)
            self._resume(kind, thread, timeout_message(wait, now_ms()), {"timed_out": True})
        elif isinstance(wait, TimeWait):
            self._resume(kind, thread, slept_message(wait, now_ms()), {"slept_s": wait.seconds})
        elif gates.expire(self.journal, kind, thread, reason):
            self._flush()

    async def _thread_emit(self, channel: str, payload: Any, key: str | None,
                           cause: Cause | None = None) -> tuple[int, bool, list[str]]:
        """An event a thread's role emits, stored like `nerve emit` stores one (a sense's name is refused);
        `cause`: its causal depth and path (one deeper than the thread)."""
        if self.config.source_kind(channel) is SourceKind.SENSE:
            raise EventError(f"{channel!r} is a sense: senses emit their own signals; emit to a channel")
        refused = emit_refusal(self.config.fleet, channel)  # another fleet host's sense
        if refused is not None:
            raise EventError(refused)
        return await self._emit(channel, payload, key, cause)

    async def _store_event(self, channel: str, payload: Any, key: str | None,
                           cause: Cause | None = None) -> tuple[int, bool, list[str]]:
        """No engine (a standalone run): stored in data/events.db, delivered and logged by the next engine."""
        stored = await asyncio.get_running_loop().run_in_executor(None, store_event, Layout(self.home).events_db,
                                                                  channel, payload, key)
        self.events_committed(channel)
        return stored.id, stored.duplicate, []

    def events_committed(self, source: str | None) -> None:
        """Events of `source` were committed (None: of some channel): threads waiting for one read them."""
        if source is None:
            self.event_waits.changed_channels()
        else:
            self.event_waits.changed(source)

    def _event_arrived(self, waiter: Waiter, event: Found) -> None:
        message = event_message(waiter.wait, event.id, waiter.source_kind, event.ts, event.payload, now_ms())
        self._resume(waiter.kind, waiter.thread, message, {"event": {"source": waiter.wait.source, "id": event.id}})

    def _resume(self, kind: Kind, thread: Thread, message: WorkflowMessage, detail: dict[str, Any]) -> None:
        """What the thread waited for came: it resumes first in line (it waited before anything queued now)."""
        if not gates.resume(self.journal, kind, thread, message, detail):
            return
        kind.queue.appendleft(thread)
        self._pump(kind)
        self._flush()
        status = "started" if thread.run_id in kind.running else "queued"
        self.report("info", f"workflow {kind.name}: {thread.run_id} resumes ({message.content[:120]}); {status}")

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
        elif not thread.resumed:  # a fork's first start: it goes on from the chain it was given
            self.journal.status(thread, ThreadStatus.STARTED, max_rounds=thread.max_rounds,
                                rounds=thread.rounds, **detail)
            thread.resumed = True
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
            for thread in list(kind.waiting.values()):
                self._watch_wait(kind, thread)
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
            self.kinds[name].queue.ageing = self.config.engine.priority_ageing
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
