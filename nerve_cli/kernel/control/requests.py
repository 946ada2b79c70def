"""What the engine answers on its control socket: ping, status, compute, read, emit, events_stored, replayed,
start_thread, answer_thread, cancel_thread, rerun_thread, pause_thread, pause_sense, reset
(the typed requests and answers: `ops`).

Requests read the engine through typed views (`snapshot`) and drive it through
`Target`'s actions; the loop's desk implements it and the engine hands it
here, never the reverse.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson

from nerve_cli.config.fleet import emit_refusal
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig, SenseConfig, format_duration
from nerve_cli.config.projection import BindError, Reading
from nerve_cli.errors import NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.kernel.control import ops
from nerve_cli.kernel.control.snapshot import SenseView
from nerve_cli.kernel.control.snapshot import Snapshot as EngineSnapshot
from nerve_cli.kernel.core.listeners import Snapshot as Backlogs
from nerve_cli.kernel.core.reads import catch_up
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.names import binding_key, channel_problem, traceparent_problem
from nerve_cli.roles.llm_env import llm_env
from nerve_cli.store.events import has_backlog
from nerve_cli.store.inbox import AgentBacklog, agent_backlog
from nerve_cli.store.sense_pauses import resolve as resolve_paused
from nerve_cli.store.sqlitefile import open_reader
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND, READ, Reason
from nerve_cli.vocab.sources import SourceKind
from nerve_cli.vocab.states import WorkerState
from nerve_cli.wire.control import COMPUTE_WAIT_MAX
from nerve_cli.wire.protocol import ReadPeer

MAX_COMPUTE_WAIT = COMPUTE_WAIT_MAX
QUEUE_SLACK = 5.0  # a person's compute may wait for one already running; beyond both, the pipe and the log
BUILTIN_WAIT = 30.0  # the built-in senses compute in the kernel, in milliseconds


class Target(Protocol):
    """The running engine, as a control-socket request sees it: typed views of its state (`snapshot`, `sense`,
    `reading`) and the actions it may take. A request changes the engine only through an action (`demand`,
    `emit`, `lift_backoff`, `reset_sense`...), never by its parts' fields."""

    home: Path
    layout: Layout
    workflows: WorkflowManager | None

    @property
    def config(self) -> NerveConfig: ...

    def snapshot(self) -> EngineSnapshot:
        """The whole engine as now."""

    def sense(self, name: str) -> SenseView | None:
        """One sense the engine schedules, as now (None: no such enabled sense)."""

    def senses(self) -> list[str]:
        """The senses the engine schedules (enabled ones and the built-ins)."""

    def reading(self, sense: str) -> Reading | None:
        """How `sense` reads its `on:` sources (None: it has none)."""

    def demand(self, sense: str, bind: dict | None = None, reason: Reason = DEMAND) -> asyncio.Future: ...

    def sources_for(self, sense: str) -> dict[str, str] | None: ...

    def emit(self, channel: str, payload: Any, key: str | None = None, via: str | None = None,
             traceparent: str | None = None, schema_version: Any = None, hashed: bool = False) -> asyncio.Future:
        """Resolves to (StoredEvent, woken senses) once the event is committed."""

    def events_stored(self, channel: str | None) -> int: ...

    async def listener_backlogs(self) -> Backlogs:
        """Each listener's backlog per source, at most a second old."""

    async def agent_backlogs(self) -> dict[str, AgentBacklog]:
        """Each agent's backlog (store.inbox.backlog), at most a second old."""

    def replayed(self, sense: str) -> None:
        """A listener's cursor was moved back: run it if events wait beyond it."""

    def lift_backoff(self, sense: str) -> None:
        """A person asked for this sense now: its failure back-off does not hold this one compute."""

    def reset_sense(self, sense: str) -> bool:
        """Lift the sense's penalty or quarantine (and start what is due); True if there was one."""

    def pause_senses(self, senses: list[str], paused: bool, by: str, via: str | None) -> list[dict[str, Any]]:
        """Pause senses (kept across restarts) or resume them: [{"sense", "status", "paused"}]."""


async def handle(engine: Target, body: dict[str, Any]) -> dict[str, Any]:
    op = body["op"]
    kind = ops.REQUESTS.get(op)
    if kind is None:
        return {"ok": False, "error": f"unknown op {op!r}; known: {', '.join(sorted(ops.REQUESTS))}"}
    try:
        request = kind.parse(body)
        return {"ok": True, **(await _HANDLERS[kind](engine, request)).to_dict()}
    except NerveError as exc:  # its kind travels too: a client raises the same error the command would offline
        return {"ok": False, "error": str(exc), "error_type": type(exc).__name__}


async def _ping(engine: Target, request: ops.Ping) -> ops.Answer:
    return ops.Pong(os.getpid())


async def _status(engine: Target, request: ops.Status) -> ops.Answer:
    backlogs = await engine.listener_backlogs()
    agents = await engine.agent_backlogs()
    return ops.Document(status(engine.snapshot(), backlogs, agents))


async def _compute(engine: Target, request: ops.Compute) -> ops.Answer:
    view = _enabled_sense(engine, request.sense)
    sense = view.name
    bind = _bind(engine, sense, request.bind)
    timeout = _timeout(request.timeout, compute_wait(engine.config, sense))
    _check_can_run(engine, view)
    if view.load_error is not None:  # answered as a one-off compute answers it: an error outcome with file:line
        return ops.Document({"sense": sense, "outcome": Outcome.ERROR, "error": view.load_error.to_dict(),
                             "duration_ms": None})
    result = await _computed(engine, sense, bind, DEMAND, timeout)
    return ops.Document({"sense": sense, **result, **_last_signal(engine, sense, result)})


async def _read(engine: Target, request: ops.Read) -> ops.Answer:
    """Bring a lazy sense up to date (for these parameter values): computes while its sources hold events it
    has not consumed, each reading at most a batch; none when nothing waits. Any other sense: nothing to do."""
    view = _enabled_sense(engine, request.sense)
    sense = view.name
    bind = _bind(engine, sense, request.bind)
    reading = engine.reading(sense)
    answer: dict[str, Any] = {"sense": sense, "bind": bind, "computes": 0, "events": 0, "error": None, "more": False}
    if reading is None or not reading.is_lazy:
        return ops.Document(answer)
    _check_can_run(engine, view)
    if view.load_error is not None:
        return ops.Document({**answer, "error": view.load_error.to_dict()})
    timeout = _timeout(request.timeout, compute_wait(engine.config, sense))
    return ops.Document({**answer, **await bring_up_to_date(engine, sense, bind, timeout)})


async def bring_up_to_date(engine: Target, sense: str, bind: dict | None, timeout: float) -> dict:
    """Compute a lazy sense (with `bind`'s values) while its sources hold events it has not consumed."""
    reading = engine.reading(sense)
    assert reading is not None  # (a lazy sense's)
    filters, binding = reading.filters(bind), binding_key(bind)
    sources = engine.sources_for(sense) or {}
    loop = asyncio.get_running_loop()

    async def waiting() -> bool:
        return await loop.run_in_executor(None, has_backlog, engine.layout.data, sense, sources, filters, binding)

    return await catch_up(waiting, lambda: _computed(engine, sense, bind, READ, timeout))


async def read_peer(engine: Target, group: str, message: ReadPeer) -> str | None:
    """A compute reads lazy peer `message.peer`: bring it up to date; None, or why it could not be."""
    try:
        view = _enabled_sense(engine, message.peer)
        if message.peer not in engine.config.senses.get(message.sense, SenseConfig()).peers:
            return f"`{message.peer}` is not listed under senses.{message.sense}.peers"
        bind = _bind(engine, view.name, ops.Compute.parse({"bind": message.bind}).bind)
        _check_can_run(engine, view)
        if view.load_error is not None:
            return f"it did not load: {view.load_error.summary()}"
        done = await bring_up_to_date(engine, view.name, bind, compute_wait(engine.config, view.name))
    except NerveError as exc:
        return str(exc)
    error = done["error"]
    return None if error is None else f"{error['type']}: {error['message']}"


def _enabled_sense(engine: Target, sense: Any) -> SenseView:
    view = engine.sense(sense) if isinstance(sense, str) else None
    if view is None:
        known = ", ".join(sorted(engine.senses()))
        raise SenseError(f"no enabled sense {sense!r} in this engine; enabled: {known}")
    return view


def _bind(engine: Target, sense: str, bind: dict | None) -> dict | None:
    """The parameter values a request gives, checked against the sense's bindings (BindError otherwise)."""
    reading = engine.reading(sense)
    if reading is None:
        if bind:
            raise BindError(f"sense `{sense}` takes no parameters, but the read binds {', '.join(bind)}")
        return None
    reading.filters(bind)
    return bind or None


async def _computed(engine: Target, sense: str, bind: dict | None, reason: Reason, timeout: float) -> dict:
    try:
        return await asyncio.wait_for(engine.demand(sense, bind, reason), timeout)
    except asyncio.TimeoutError:
        raise NerveError(f"{sense} did not finish within {timeout:g}s (it is still scheduled"
                         f"{_held_by_throttle(engine, sense)})") from None


def _held_by_throttle(engine: Target, sense: str) -> str:
    view = engine.sense(sense)
    state = view.state if view is not None else None
    if state is None or state.running or state.throttle_free() <= time.time():
        return ""
    until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(state.throttle_free()))  # zone shown
    return f"; its throttle of {format_duration(state.throttle)} holds it until {until}"


def compute_wait(config: NerveConfig, sense: str) -> float:
    """How long a compute asked for now may take: one already running, then this one, each ended by its
    timeout and at the latest by its grace period's kill."""
    settings = config.senses.get(sense)
    if settings is None:
        return BUILTIN_WAIT
    return min(MAX_COMPUTE_WAIT, 2 * Policy.limits(settings).hard + QUEUE_SLACK)


def _timeout(value: Any, default: float) -> float:
    """Seconds to wait for a compute: absent means as long as the sense's own limits allow (`compute_wait`);
    anything else must make sense."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_COMPUTE_WAIT:
        # a negative timeout answered at once while the compute still ran
        raise NerveError(f"timeout must be a number of seconds above 0 and at most {MAX_COMPUTE_WAIT:g}, got {value!r}")
    return float(value)


def _check_can_run(engine: Target, view: SenseView) -> None:
    """Refuse at once what would otherwise wait: a quarantined sense, a worker that is down (a sense that failed
    to load is answered at once too, by `_compute`, with its error)."""
    sense, state = view.name, view.state
    if state.paused:
        raise SenseError(f"{sense} is paused: its computes wait until `nerve sense resume {sense}`")
    if state.quarantined:
        until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(state.blocked_until or 0))  # zone shown
        raise SenseError(f"{sense} is quarantined until {until} ({state.blocked_why}); "
                         f"lift it with `nerve sense reset {sense}`")
    if state.blocked_until:
        engine.lift_backoff(sense)
    if sense in BUILTIN_SENSES:  # the kernel computes it: no worker to check
        return
    worker = view.worker
    if worker is None:
        raise SenseError(f"{sense}: its worker group is not running")
    if worker.state is WorkerState.BACKOFF and view.load_error is None:
        raise SenseError(f"{sense}: worker group={worker.group} is down ({worker.last_exit}); "
                         "it is being restarted with back-off, see `nerve status`")


def _last_signal(engine: Target, sense: str, result: dict) -> dict:
    """The payload of the compute just finished, read back from its own database."""
    if result.get("outcome") != Outcome.SIGNAL:
        return {}  # an error is in the result itself: type, message, file, line, traceback
    path = engine.layout.sense_db(sense)
    try:
        conn = open_reader(path)
        try:
            row = conn.execute("SELECT ts, payload FROM _signals ORDER BY id DESC LIMIT 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return {}
    return {"payload": orjson.loads(row[1]), "ts": row[0]} if row else {}


async def _emit(engine: Target, request: ops.Emit) -> ops.Answer:
    """Answered only once the event is committed to data/events.db (and its listeners are woken)."""
    channel = request.channel
    problem = channel_problem(channel)
    if problem is not None:
        shown = repr(channel)[:60] + ("…" if len(repr(channel)) > 60 else "")
        raise NerveError(f"emit needs a channel name: {problem} ({shown})")
    assert isinstance(channel, str)  # channel_problem refuses anything else
    if engine.config.source_kind(channel) is SourceKind.SENSE:
        raise NerveError(f"{channel!r} is a sense: senses emit their own signals; use `nerve sense compute {channel}`")
    refused = emit_refusal(engine.config.fleet, channel)
    if refused is not None:
        raise NerveError(refused)
    traceparent = request.traceparent
    if traceparent is not None and (problem := traceparent_problem(traceparent)) is not None:
        raise NerveError(f"emit: {problem}")
    event, woken = await engine.emit(channel, request.payload, request.key, schema_version=request.schema_version,
                                     hashed=request.hashed, traceparent=traceparent)
    return ops.Emitted(channel, event.id, event.ts, event.duplicate, woken, event.schema_version, event.hash)


async def _events_stored(engine: Target, request: ops.EventsStored) -> ops.Answer:
    """`nerve emit` stored events itself while this engine was starting: log them and wake their listeners."""
    return ops.Logged(engine.events_stored(request.channel))


async def _replayed(engine: Target, request: ops.Replayed) -> ops.Answer:
    """`nerve sense replay` moved a listener's cursor back: run it now if events wait beyond it."""
    sense = request.sense
    if not isinstance(sense, str) or sense not in engine.config.senses:
        raise NerveError(f"replayed needs a sense of this engine, got {sense!r}")
    engine.replayed(sense)
    return ops.SenseNamed(sense)


def _workflows(engine: Target) -> WorkflowManager:
    if engine.workflows is None:
        raise NerveError("workflows are not available in this engine")
    return engine.workflows


async def _start_thread(engine: Target, request: ops.StartThread) -> ops.Answer:
    started = _workflows(engine).launch(request.workflow, request.prompt, request.max_rounds, request.origin)
    return ops.Document({**started, "llm": llm_env().to_json()})  # the caller can say when its llm env differs


async def _answer_thread(engine: Target, request: ops.AnswerThread) -> ops.Answer:
    """A person's answer to a waiting thread (one store-level answer: `store.answers.Answer`) → {"run_id",
    "decision", "status", "answered", "settled", "open", "resumes"}."""
    return ops.Document(_workflows(engine).answer(request.answer))


async def _cancel_thread(engine: Target, request: ops.CancelThread) -> ops.Answer:
    """Cancel a live thread: {"run_id", "reason"?, "by"?, "via"?} → {"run_id", "status": cancelled|cancelling, "was"}."""
    return ops.Document(_workflows(engine).cancel(request.run_id, request.reason, request.by, request.via))


async def _rerun_thread(engine: Target, request: ops.RerunThread) -> ops.Answer:
    """A new thread from an old one: {"run_id", "from_round"?, "message"?, "by"?, "via"?} → {"run_id", "status", ...}."""
    return ops.Document(_workflows(engine).rerun(request.run_id, request.from_round, request.message, request.by,
                                                 request.via))


async def _pause_thread(engine: Target, request: ops.PauseThread) -> ops.Answer:
    """Pause or resume a thread: {"run_id", "resume"?, "by"?, "via"?} → {"run_id", "status", "was"?}."""
    manager = _workflows(engine)
    if request.resume:
        return ops.Document(manager.resume(request.run_id, request.by, request.via))
    return ops.Document(manager.pause(request.run_id, request.by, request.via))


async def _pause_sense(engine: Target, request: ops.PauseSense) -> ops.Answer:
    """Pause or resume senses: {"senses": [...] | "group", "resume"?, "by"?, "via"?} → {"senses": [{"sense",
    "status": paused|resumed|unchanged, "paused"}]}. Built-in senses are not paused."""
    names = resolve_paused(engine.config.senses, list(request.senses), request.group)
    return ops.Document({"senses": engine.pause_senses(names, not request.resume, request.by, request.via)})


async def _reset(engine: Target, request: ops.Reset) -> ops.Answer:
    sense = request.sense
    if not isinstance(sense, str) or engine.sense(sense) is None:
        raise NerveError(f"no enabled sense {sense!r} in this engine")
    return ops.WasReset(sense, engine.reset_sense(sense))


def status(snapshot: EngineSnapshot, listeners: Backlogs | None = None,
           agents: Mapping[str, AgentBacklog] | None = None) -> dict:
    now = time.time()
    senses = {}
    for name, view in snapshot.senses.items():
        state, errors = view.state, view.errors
        senses[name] = {
            "group": view.group, "running": state.running, "pending": state.pending, "runs": state.runs,
            "last_run": state.last_complete, "next_due": None if view.next_due is None else max(view.next_due, now),
            "interval": state.interval, "errors": errors.count, "last_error": errors.last,
            "last_error_at": errors.last_ts,
            "load_error": view.load_error.to_dict() if view.load_error is not None else None,
            "load_failed_since": view.load_failed_since,
            "coalesced": state.coalesced, "deferred": state.deferred, "debounced": state.debounced,
            "skipped": state.skipped, "blocked_until": state.blocked_until, "blocked_why": state.blocked_why,
            "queued_since": state.queued_since, "queued_priority": state.queued_priority,
            "state": view.status,
            "expect_signal_every": view.expect_signal_every, "stale_since": view.stale_since,
        }
    return {
        "pid": snapshot.pid, "home": str(snapshot.home), "started_at": snapshot.started_at,
        "webhooks_url": snapshot.webhooks_url,
        **({"notify": {rule: dict(figures) for rule, figures in snapshot.notify.items()}} if snapshot.notify else {}),
        "llm": llm_env().to_json(),  # what the workflow workers inherit: the models their roles call
        "uptime_s": round(now - snapshot.started_at, 1),
        "workers": [w.described for w in snapshot.workers.values()],
        "senses": senses,
        "channels": snapshot.channels,
        "warnings": snapshot.warnings,  # nerve.yaml's current warnings: counted apart from errors
        "errors": snapshot.errors_total,
        "workflows": snapshot.workflows,
        "fleet": snapshot.fleet,
        **({"traces": snapshot.traces} if snapshot.traces is not None else {}),
        "causal": dict(snapshot.causal),
        "listeners": {name: {"enabled": name in snapshot.enabled,
                             "sources": [{"source": b.source, "kind": b.kind, "cursor": b.cursor, "events": b.events,
                                          "oldest_ts": b.oldest_ts} for b in found]}
                      for name, found in (listeners or {}).items()},
        "agents": {name: agent_backlog(b) for name, b in (agents or {}).items()},
    }


_HANDLERS: dict[type[ops.Request], Callable[[Target, Any], Awaitable[ops.Answer]]] = {
    ops.Ping: _ping, ops.Status: _status, ops.Compute: _compute, ops.Read: _read, ops.Emit: _emit,
    ops.EventsStored: _events_stored, ops.Replayed: _replayed, ops.Reset: _reset, ops.StartThread: _start_thread,
    ops.AnswerThread: _answer_thread, ops.CancelThread: _cancel_thread, ops.RerunThread: _rerun_thread,
    ops.PauseThread: _pause_thread, ops.PauseSense: _pause_sense}
