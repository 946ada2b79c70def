"""What the engine answers on its control socket: ping, status, compute, emit, start_thread, answer_thread,
cancel_thread, rerun_thread, reset.

Requests read and drive the engine through `Target`; the engine implements it
and imports this module, not the reverse.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol

import orjson

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.config.fleet import emit_refusal
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig, SenseConfig, format_duration
from nerve_cli.config.projection import BindError, Reading
from nerve_cli.errors import NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.listeners import Snapshot
from nerve_cli.kernel.core.reads import catch_up
from nerve_cli.kernel.core.scheduler import Scheduler, SenseState
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.supervisor import GroupSupervisor
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.names import binding_key, channel_problem, traceparent_problem
from nerve_cli.roles.llm_env import llm_env
from nerve_cli.store import answers
from nerve_cli.store.events import has_backlog
from nerve_cli.store.sqlitefile import open_reader
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND, READ, Reason
from nerve_cli.vocab.states import SenseStatus, WorkerState
from nerve_cli.wire.control import COMPUTE_WAIT_MAX
from nerve_cli.wire.protocol import ErrorInfo, ReadPeer

MAX_COMPUTE_WAIT = COMPUTE_WAIT_MAX
QUEUE_SLACK = 5.0  # a person's compute may wait for one already running; beyond both, the pipe and the log
BUILTIN_WAIT = 30.0  # the built-in senses compute in the kernel, in milliseconds


class Target(Protocol):
    """The running engine, as a control-socket request sees it: what it reads (the scheduler's and the
    supervisors' state, for answers) and the actions it may take. A request changes the engine only
    through an action (`demand`, `emit`, `lift_backoff`, `reset_sense`...), never by its parts' fields."""

    home: Path
    layout: Layout
    started_at: float
    @property
    def config(self) -> NerveConfig: ...
    scheduler: Scheduler
    @property
    def groups(self) -> dict[str, GroupSupervisor]: ...
    @property
    def errors(self) -> dict[str, dict[str, Any]]: ...  # sense → {"count", "last", "last_ts"}
    warnings: list[str]  # nerve.yaml's current warnings
    workflows: WorkflowManager | None
    @property
    def fleet(self) -> Any: ...  # kernel.fleet.service.Fleet when nerve.yaml has a fleet (typed loosely: it imports nats)
    webhooks: Any  # kernel.ingress.webhooks.WebhookServer when webhooks are on (not imported here: it loads uvicorn)
    @property
    def freshness(self) -> Freshness: ...
    @property
    def readings(self) -> dict[str, Reading]: ...  # how each sense with `on:` sources reads them

    def demand(self, sense: str, bind: dict | None = None, reason: Reason = DEMAND) -> asyncio.Future: ...

    def sources_for(self, sense: str) -> dict[str, str] | None: ...

    def emit(self, channel: str, payload: Any, key: str | None = None, via: str | None = None,
             traceparent: str | None = None, schema_version: Any = None, hashed: bool = False) -> asyncio.Future:
        """Resolves to (StoredEvent, woken senses) once the event is committed."""

    def events_stored(self, channel: str | None) -> int: ...

    async def listener_backlogs(self) -> Snapshot:
        """Each listener's backlog per source, at most a second old."""

    def replayed(self, sense: str) -> None:
        """A listener's cursor was moved back: run it if events wait beyond it."""

    def lift_backoff(self, sense: str) -> None:
        """A person asked for this sense now: its failure back-off does not hold this one compute."""

    def reset_sense(self, sense: str) -> bool:
        """Lift the sense's penalty or quarantine (and start what is due); True if there was one."""


async def handle(engine: Target, request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    handler = _OPS.get(op)
    if handler is None:
        return {"ok": False, "error": f"unknown op {op!r}; known: {', '.join(sorted(_OPS))}"}
    try:
        return {"ok": True, **await handler(engine, request)}
    except NerveError as exc:  # its kind travels too: a client raises the same error the command would offline
        return {"ok": False, "error": str(exc), "error_type": type(exc).__name__}


async def _ping(engine: Target, request: dict) -> dict:
    return {"pid": os.getpid()}


async def _status(engine: Target, request: dict) -> dict:
    return status(engine, await engine.listener_backlogs())





async def _compute(engine: Target, request: dict) -> dict:
    sense = _enabled_sense(engine, request.get("sense"))
    bind = _bind(engine, sense, request.get("bind"))
    timeout = _timeout(request.get("timeout"), compute_wait(engine.config, sense))
    _check_can_run(engine, sense)
    failed = _load_failure(engine, sense)
    if failed is not None:  # answered as a one-off compute answers it: an error outcome with file:line
        return {"sense": sense, "outcome": Outcome.ERROR, "error": failed.to_dict(), "duration_ms": None}
    result = await _computed(engine, sense, bind, DEMAND, timeout)
    return {"sense": sense, **result, **_last_signal(engine, sense, result)}


async def _read(engine: Target, request: dict) -> dict:
    """Bring a lazy sense up to date (for these parameter values): computes while its sources hold events it
    has not consumed, each reading at most a batch; none when nothing waits. Any other sense: nothing to do."""
    sense = _enabled_sense(engine, request.get("sense"))
    bind = _bind(engine, sense, request.get("bind"))
    reading = engine.readings.get(sense)
    answer: dict[str, Any] = {"sense": sense, "bind": bind, "computes": 0, "events": 0, "error": None, "more": False}
    if reading is None or not reading.is_lazy:
        return answer
    _check_can_run(engine, sense)
    failed = _load_failure(engine, sense)
    if failed is not None:
        return {**answer, "error": failed.to_dict()}
    timeout = _timeout(request.get("timeout"), compute_wait(engine.config, sense))
    return {**answer, **await bring_up_to_date(engine, sense, bind, timeout)}


async def bring_up_to_date(engine: Target, sense: str, bind: dict | None, timeout: float) -> dict:
    """Compute a lazy sense (with `bind`'s values) while its sources hold events it has not consumed."""
    reading = engine.readings[sense]
    filters, binding = reading.filters(bind), binding_key(bind)
    sources = engine.sources_for(sense) or {}
    loop = asyncio.get_running_loop()

    async def waiting() -> bool:
        return await loop.run_in_executor(None, has_backlog, engine.layout.data, sense, sources, filters, binding)

    return await catch_up(waiting, lambda: _computed(engine, sense, bind, READ, timeout))


async def read_peer(engine: Target, group: str, message: ReadPeer) -> str | None:
    """A compute reads lazy peer `message.peer`: bring it up to date; None, or why it could not be."""
    try:
        sense = _enabled_sense(engine, message.peer)
        if message.peer not in engine.config.senses.get(message.sense, SenseConfig()).peers:
            return f"`{message.peer}` is not listed under senses.{message.sense}.peers"
        bind = _bind(engine, sense, message.bind)
        _check_can_run(engine, sense)
        failed = _load_failure(engine, sense)
        if failed is not None:
            return f"it did not load: {failed.summary()}"
        done = await bring_up_to_date(engine, sense, bind, compute_wait(engine.config, sense))
    except NerveError as exc:
        return str(exc)
    error = done["error"]
    return None if error is None else f"{error['type']}: {error['message']}"


def _enabled_sense(engine: Target, sense: Any) -> str:
    if not isinstance(sense, str) or sense not in engine.scheduler.states:
        known = ", ".join(sorted(engine.scheduler.states))
        raise SenseError(f"no enabled sense {sense!r} in this engine; enabled: {known}")
    return sense


def _bind(engine: Target, sense: str, bind: Any) -> dict | None:
    """The parameter values a request gives, checked against the sense's bindings (BindError otherwise)."""
    if bind is not None and not isinstance(bind, dict):
        raise NerveError(f"bind is an object of parameter values, got {bind!r}")
    reading = engine.readings.get(sense)
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
    state = engine.scheduler.states.get(sense)
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


def _check_can_run(engine: Target, sense: str) -> None:
    """Refuse at once what would otherwise wait: a quarantined sense, a worker that is down (a sense that failed
    to load is answered at once too, by `_compute`, with its error)."""
    state = engine.scheduler.states[sense]
    if state.quarantined:
        until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(state.blocked_until or 0))  # zone shown
        raise SenseError(f"{sense} is quarantined until {until} ({state.blocked_why}); "
                         f"lift it with `nerve sense reset {sense}`")
    if state.blocked_until:
        engine.lift_backoff(sense)
    if sense in BUILTIN_SENSES:  # the kernel computes it: no worker to check
        return
    supervisor = engine.groups.get(engine.config.senses[sense].group)
    if supervisor is None:
        raise SenseError(f"{sense}: its worker group is not running")
    if supervisor.state is WorkerState.BACKOFF and sense not in supervisor.failed:
        raise SenseError(f"{sense}: worker group={supervisor.group} is down ({supervisor.last_exit}); "
                         "it is being restarted with back-off, see `nerve status`")


def _load_failure(engine: Target, sense: str) -> ErrorInfo | None:
    """The ErrorInfo of a sense whose code did not load in its worker, else None."""
    if sense in BUILTIN_SENSES:
        return None
    supervisor = engine.groups.get(engine.config.senses[sense].group)
    return supervisor.failed.get(sense) if supervisor is not None else None


def _last_signal(engine: Target, sense: str, result: dict) -> dict:
    """The payload of the compute just finished, read back from its own database."""
    if result.get("outcome") != "signal":
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


async def _emit(engine: Target, request: dict) -> dict:
    """Answered only once the event is committed to data/events.db (and its listeners are woken)."""
    channel = request.get("channel")
    problem = channel_problem(channel)
    if problem is not None:
        shown = repr(channel)[:60] + ("…" if len(repr(channel)) > 60 else "")
        raise NerveError(f"emit needs a channel name: {problem} ({shown})")
    if channel in engine.config.senses or channel in BUILTIN_SENSES:
        raise NerveError(f"{channel!r} is a sense: senses emit their own signals; use `nerve sense compute {channel}`")
    assert isinstance(channel, str)  # channel_problem refuses anything else
    refused = emit_refusal(engine.config.fleet, channel)
    if refused is not None:
        raise NerveError(refused)
    traceparent = request.get("traceparent")
    if traceparent is not None and (problem := traceparent_problem(traceparent)) is not None:
        raise NerveError(f"emit: {problem}")
    hashed = request.get("hash", False)
    if not isinstance(hashed, bool):
        raise NerveError(f"emit: hash is true (store the payload's content hash) or false, got {hashed!r}")
    event, woken = await engine.emit(channel, request.get("payload"), request.get("key"),
                                     schema_version=request.get("schema_version"), hashed=hashed,
                                     traceparent=traceparent)
    return {"channel": channel, "event_id": event.id, "ts": event.ts, "duplicate": event.duplicate,
            "triggered": woken, "schema_version": event.schema_version, "hash": event.hash}


async def _events_stored(engine: Target, request: dict) -> dict:
    """`nerve emit` stored events itself while this engine was starting: log them and wake their listeners."""
    channel = request.get("channel")
    return {"logged": engine.events_stored(channel if isinstance(channel, str) else None)}


async def _replayed(engine: Target, request: dict) -> dict:
    """`nerve sense replay` moved a listener's cursor back: run it now if events wait beyond it."""
    sense = request.get("sense")
    if not isinstance(sense, str) or sense not in engine.config.senses:
        raise NerveError(f"replayed needs a sense of this engine, got {sense!r}")
    engine.replayed(sense)
    return {"sense": sense}


async def _start_thread(engine: Target, request: dict) -> dict:
    if engine.workflows is None:
        raise NerveError("workflows are not available in this engine")
    workflow, prompt = request.get("workflow"), request.get("prompt")
    if not isinstance(workflow, str) or not isinstance(prompt, str):
        raise NerveError("start_thread needs a workflow name and a prompt")
    started = engine.workflows.launch(workflow, prompt, request.get("max_rounds"), _origin(request.get("origin")))
    return {**started, "llm": llm_env().to_json()}  # the caller can say when its own llm environment differs


MAX_ORIGIN_FIELDS, MAX_ORIGIN_TEXT = 8, 200


def _origin(given: Any) -> dict[str, str]:
    """Where a thread started through the socket came from: the client's own account (`kind`, `by`, `via`,
    `client`: short text), else "control socket"."""
    if not isinstance(given, dict) or not given:
        return {"by": "control socket"}
    if len(given) > MAX_ORIGIN_FIELDS or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 40 and len(v) <= MAX_ORIGIN_TEXT
            for k, v in given.items()):
        raise NerveError(f"start_thread: origin is at most {MAX_ORIGIN_FIELDS} short text fields, "
                         'e.g. {"kind": "mcp", "by": "ada"}')
    return dict(given)


async def _answer_thread(engine: Target, request: dict) -> dict:
    """A person's answer to a waiting thread: {"run_id", "decision": "approve"|"reject", "question"? (its id;
    none: every open question), "note"?, "by"?, "via"?, "answer"?} → {"run_id", "decision", "status",
    "answered", "settled", "open", "resumes"}."""
    if engine.workflows is None:
        raise NerveError("workflows are not available in this engine")
    run_id, decision, note = request.get("run_id"), request.get("decision"), request.get("note")
    if not isinstance(run_id, str) or decision not in ("approve", "reject"):
        raise NerveError('answer_thread needs a run_id and a decision, "approve" or "reject"')
    if note is not None and not isinstance(note, str):
        raise NerveError("answer_thread: note must be a string")
    question = request.get("question")
    if question is not None and not isinstance(question, str):
        raise NerveError("answer_thread: question is a question's id (a string such as q2)")
    by = request.get("by")
    if not isinstance(by, str):
        by = "control socket"
    via = request.get("via")
    if not isinstance(via, str):
        via = "control socket"
    given = answers.Answer(run_id, decision, by[:MAX_ORIGIN_TEXT], via[:MAX_ORIGIN_TEXT], note,
                           request["answer"] if "answer" in request else NO_ANSWER, question)
    return engine.workflows.answer(given)


async def _cancel_thread(engine: Target, request: dict) -> dict:
    """Cancel a live thread: {"run_id", "reason"?, "by"?, "via"?} → {"run_id", "status": cancelled|cancelling, "was"}."""
    if engine.workflows is None:
        raise NerveError("workflows are not available in this engine")
    run_id, reason = request.get("run_id"), request.get("reason")
    if not isinstance(run_id, str) or not (reason is None or isinstance(reason, str)):
        raise NerveError("cancel_thread needs a run_id, and a reason (a string) if any")
    by, via = _who(request)
    return engine.workflows.cancel(run_id, reason, by, via)


async def _rerun_thread(engine: Target, request: dict) -> dict:
    """A new thread from an old one: {"run_id", "from_round"?, "message"?, "by"?, "via"?} → {"run_id", "status", ...}."""
    if engine.workflows is None:
        raise NerveError("workflows are not available in this engine")
    run_id, from_round, message = request.get("run_id"), request.get("from_round"), request.get("message")
    if not isinstance(run_id, str) or not (from_round is None or (isinstance(from_round, int)
                                                                  and not isinstance(from_round, bool))):
        raise NerveError("rerun_thread needs a run_id, and from_round (a whole number) if any")
    if message is not None and not isinstance(message, str):
        raise NerveError("rerun_thread: message must be a string")
    by, via = _who(request)
    return engine.workflows.rerun(run_id, from_round, message, by, via)


def _who(request: dict) -> tuple[str, str | None]:
    """Who asked (`by`, else "control socket") and how (`via`, a command or client), as answers record them."""
    by, via = request.get("by"), request.get("via")
    return (by if isinstance(by, str) else "control socket"), (via if isinstance(via, str) else None)


def _state(state: SenseState, load_failed: bool = False) -> SenseStatus:
    if load_failed:
        return SenseStatus.LOAD_FAILED
    if state.running:
        return SenseStatus.RUNNING
    if state.quarantined:
        return SenseStatus.QUARANTINED
    if state.blocked_until:
        return SenseStatus.PENALISED
    return SenseStatus.PENDING if state.pending else SenseStatus.IDLE


async def _reset(engine: Target, request: dict) -> dict:
    sense = request.get("sense")
    if not isinstance(sense, str) or sense not in engine.scheduler.states:
        raise NerveError(f"no enabled sense {sense!r} in this engine")
    return {"sense": sense, "was_blocked": engine.reset_sense(sense)}


def status(engine: Target, listeners: Snapshot | None = None) -> dict:
    now = time.time()
    senses = {}
    for name, state in engine.scheduler.states.items():
        group = engine.config.senses[name].group if name in engine.config.senses else "kernel"
        errors = engine.errors.get(name, {})
        supervisor = engine.groups.get(group)
        load_error = supervisor.failed.get(name) if supervisor is not None else None
        due = None if load_error is not None else engine.scheduler.next_due(name)  # it cannot run: nothing is due
        senses[name] = {
            "group": group, "running": state.running, "pending": state.pending, "runs": state.runs,
            "last_run": state.last_complete, "next_due": None if due is None else max(due, now),
            "interval": state.interval, "errors": errors.get("count", 0), "last_error": errors.get("last"),
            "last_error_at": errors.get("last_ts"),
            "load_error": load_error.to_dict() if load_error is not None else None,
            "load_failed_since": supervisor.failed_since.get(name) if supervisor and load_error else None,
            "coalesced": state.coalesced, "deferred": state.deferred, "debounced": state.debounced,
            "skipped": state.skipped, "blocked_until": state.blocked_until, "blocked_why": state.blocked_why,
            "state": _state(state, load_error is not None),
            "expect_signal_every": engine.freshness.expected.get(name), "stale_since": engine.freshness.stale.get(name),
        }
    return {
        "pid": os.getpid(), "home": str(engine.home), "started_at": engine.started_at,
        "webhooks_url": engine.webhooks.url if engine.webhooks is not None else None,
        "llm": llm_env().to_json(),  # what the workflow workers inherit: the models their roles call
        "uptime_s": round(now - engine.started_at, 1),
        "workers": [s.describe() for s in engine.groups.values()],
        "senses": senses,
        "channels": sorted(engine.config.external_channels()),
        "warnings": list(engine.warnings),  # nerve.yaml's current warnings: counted apart from errors
        "errors": sum(e["count"] for e in engine.errors.values()),
        "workflows": engine.workflows.status() if engine.workflows is not None else {},
        "fleet": engine.fleet.status() if engine.fleet is not None else None,
        "listeners": {name: {"enabled": name in engine.config.enabled_senses(),
                             "sources": [{"source": b.source, "kind": b.kind, "cursor": b.cursor, "events": b.events,
                                          "oldest_ts": b.oldest_ts} for b in found]}
                      for name, found in (listeners or {}).items()},
    }


_OPS = {"ping": _ping, "status": _status, "compute": _compute, "read": _read, "emit": _emit,
        "start_thread": _start_thread, "answer_thread": _answer_thread, "cancel_thread": _cancel_thread,
        "rerun_thread": _rerun_thread, "reset": _reset, "events_stored": _events_stored, "replayed": _replayed}
