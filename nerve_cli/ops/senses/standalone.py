"""`nerve sense compute NAME`: one compute now, through the running engine or in a fresh worker.

Without an engine, a real sense worker is spawned for that one sense (same
process isolation, same transaction contract as under the engine), sent one
`Compute`, and shut down. The run is recorded in logs.db the way the engine
records it (`reflex/run_start`, `run_complete`, `system/error`), so `nerve logs`
shows it and the sense's interval counts from it.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from nerve_cli.config.load import load_config
from nerve_cli.config.mesh import sources_of
from nerve_cli.config.model import BUILTIN_SENSES, HEALTH_SENSE, NerveConfig, format_duration
from nerve_cli.config.projection import reading
from nerve_cli.errors import NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.kernel.core.listeners import all_sources
from nerve_cli.kernel.supervision.policy import Limits, Policy
from nerve_cli.names import binding_key
from nerve_cli.ops.client import compute, engine_running
from nerve_cli.ops.senses.worker_client import Answer, SenseWorkerClient, WorkerGone
from nerve_cli.store.events import backlog, has_backlog
from nerve_cli.store.logs import LogStore, signal_mark
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogKind, LogRow
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND, READ, Reason
from nerve_cli.wire.protocol import LOG_PREFIX, Cancel, Compute, Error, ErrorInfo, ReadPeer, Signal, Silent
from nerve_cli.wire.spec import GroupSpec

START_TIMEOUT = 60.0  # worker start-up includes the sense's own imports


@dataclass(frozen=True)
class ComputeResult:
    sense: str
    outcome: Outcome  # signal | silent | error
    payload: Any = None
    duration_ms: float | None = None
    error: ErrorInfo | None = None
    ts: int | None = None
    workflow: str | None = None  # the compute's workflow directive, as it returned it
    thread: dict[str, Any] | None = None  # what the directive did: {"run_id", "status", "reason"}
    consumed: tuple[dict[str, Any], ...] = ()  # the events it received, per source: {source, count, first, last}
    skipped: tuple[dict[str, Any], ...] = ()  # sources of disabled reflexes with events waiting: {source, events}
    via: str = "worker"  # worker | engine
    output: tuple[dict[str, str], ...] = ()  # what the compute printed: {"stream": stdout|stderr, "text"}
    signal_id: int | None = None  # its `_signals` row (standalone runs log it, as the engine does)
    events: int = 0  # events it consumed
    more: bool = False  # events beyond its batch still wait


def compute_sense(home: Path, name: str, *, stderr: int | IO[Any] | None = None,
                  bind: dict[str, Any] | None = None) -> ComputeResult:
    """Through the engine when one runs for `home`, else in a one-off worker."""
    if engine_running(home):
        return compute_via_engine(home, name, bind)
    return compute_standalone(home, name, stderr=stderr, bind=bind)


def compute_via_engine(home: Path, name: str, bind: dict[str, Any] | None = None) -> ComputeResult:
    answer = compute(home, name, bind)  # waits as long as the engine does for this sense
    error = answer.get("error")
    info = None
    if answer.get("outcome") not in (Outcome.SIGNAL, Outcome.SILENT):
        info = ErrorInfo(**error) if isinstance(error, dict) else ErrorInfo("Error", str(error or answer.get("outcome")))
    return ComputeResult(name, Outcome.ERROR if info else Outcome(answer["outcome"]), answer.get("payload"),
                         answer.get("duration_ms"), info, answer.get("ts"), workflow=answer.get("workflow"),
                         thread=answer.get("thread"), via="engine", output=tuple(answer.get("output") or ()),
                         consumed=tuple(answer.get("consumed") or ()), skipped=tuple(waiting_elsewhere(home, name)),
                         events=answer.get("events", 0))


def not_a_user_sense(config: NerveConfig, name: str, why: str) -> SenseError:
    """The error for `name`, which nerve.yaml does not define: a built-in sense is the engine's own (it has no
    code to run here, `why`), anything else is unknown."""
    if name in BUILTIN_SENSES:
        when = (f"every {format_duration(config.engine.health_interval)}" if name == HEALTH_SENSE
                else "after every change of a thread's status")
        return SenseError(f"`{name}` is built into the engine, which computes it {when}; {why}, and it has none. "
                          f"With the engine running (`nerve run`), `nerve sense compute {name}` asks it for one now; "
                          f"`nerve sense show {name}` shows what it signalled")
    return SenseError(f"no sense `{name}` in nerve.yaml; `nerve sense list` shows the senses, "
                      f"`nerve sense new {name}` creates one")


def compute_standalone(home: Path, name: str, *, stderr: int | IO[Any] | None = None, log: bool = True,
                       bind: dict[str, Any] | None = None, reason: Reason = DEMAND) -> ComputeResult:
    """Spawn a worker for `name` alone, run one compute (with `bind`'s parameter values), stop the worker."""
    config = load_config(home)
    settings = config.senses.get(name)
    if settings is None:
        raise not_a_user_sense(config, name, "a one-off compute runs a sense's own code in a worker")
    if not settings.enabled:
        raise SenseError(f"sense `{name}` is disabled (senses.{name}.enabled: false in nerve.yaml); "
                         f"enable it with `nerve sense enable {name}`")
    filters = reading(config, name).filters(bind) or None  # BindError before anything starts
    sources = sources_of(config).get(name)
    recorder = _Recorder(home, name, reason) if log else None
    if recorder:
        recorder.start()
    # its `on:` sources: a compute that takes `trigger` consumes its events here as it would under the engine
    # the engine's supervision policy, but a longer wait for the worker to load (a first import is cold)
    policy = Policy.of(config.engine, ready_timeout=START_TIMEOUT)
    # the worker gets this sense's settings as the kernel hands them over: it need not read nerve.yaml
    # again (pydantic and ruamel, about half its start-up)
    spec = GroupSpec.from_config(config, settings.group, [name]).to_json()
    result = _run(home, name, settings.group, policy, policy.limits(settings), stderr,
                  Compute(0, name, reason, sources, filters=filters, bind=bind or None), spec)
    if recorder:
        recorder.finish(result)
    return dataclasses.replace(result, skipped=tuple(waiting_elsewhere(home, name, config)))


def waiting_elsewhere(home: Path, name: str, config: NerveConfig | None = None) -> list[dict[str, Any]]:
    """Sources of `name` named only by disabled reflexes that hold events for it: a compute does not consume
    them (they wait, unconsumed, until their reflex is enabled again); {source, events}."""
    config = config or load_config(home)
    active = sources_of(config).get(name) or {}
    idle = {s: k for s, k in all_sources(config, name).items() if s not in active}
    if not idle:
        return []
    return [{"source": b.source, "events": b.events} for b in backlog(Layout(home).data, name, idle) if b.events]


def _run(home: Path, name: str, group: str, policy: Policy, limits: Limits, stderr: Any,
         request: Compute, spec: str | None = None) -> ComputeResult:
    answer, printed = one_compute(home, name, group, policy, limits, stderr, request, spec)
    if isinstance(answer, ErrorInfo):
        killed = (limits.timeout + limits.grace) * 1000 if answer.type == "TimeoutError" else None
        return ComputeResult(name, Outcome.ERROR, duration_ms=killed, error=answer, output=printed)
    if isinstance(answer, Signal):
        return ComputeResult(name, Outcome.SIGNAL, answer.payload, answer.duration_ms, ts=answer.ts,
                             workflow=answer.workflow, thread=_not_started() if answer.workflow else None,
                             output=printed, signal_id=answer.signal_id, consumed=tuple(answer.consumed),
                             events=answer.events, more=answer.more)
    if isinstance(answer, Error):
        return ComputeResult(name, Outcome.ERROR, duration_ms=answer.duration_ms, error=answer.error, output=printed)
    assert isinstance(answer, Silent)
    return ComputeResult(name, Outcome.SILENT, duration_ms=answer.duration_ms, output=printed,
                         consumed=tuple(answer.consumed), events=answer.events, more=answer.more)


def one_compute(home: Path, name: str, group: str, policy: Policy, limits: Limits, stderr: Any, request: Compute,
                spec: str | None = None, *, dry_run: bool = False) -> tuple[Answer | ErrorInfo, tuple[dict[str, str], ...]]:
    """One compute of `name` (`request`, its id given here) in a worker spawned for it alone: (its answer, or
    why there is none; what it printed).

    `dry_run`: the worker only rehearses (answer: DryRun; `request.sample` as its events when given)."""
    # By default the sense's own output passes through to our stderr, but not the worker's
    # log lines: what they say (e.g. a load failure) is in the result we render.
    forward = _user_output if stderr is None else None
    client = SenseWorkerClient(home, group, [name], stderr=stderr, on_stderr=forward, spec=spec, dry_run=dry_run,
                               on_peer_read=lambda m: _peer_read(home, m, stderr))
    ready = client.start(policy.ready_timeout)
    soft, grace = limits.timeout, limits.grace
    compute_id = 0
    answer: Answer | ErrorInfo
    try:
        if name in ready.failed:
            return ready.failed[name], ()
        compute_id = client.next_id()
        client.send(dataclasses.replace(request, id=compute_id))
        try:
            answer = client.answer(compute_id, timeout=soft)
        except TimeoutError:
            client.send(Cancel(compute_id))  # the worker answers at once and rolls back
            try:
                answer = client.answer(compute_id, timeout=grace)
            except TimeoutError:
                client.kill()
                answer = ErrorInfo("TimeoutError", f"still running {grace:g}s after its {soft:g}s timeout; "
                                                   "the worker was killed")
    except WorkerGone as exc:
        answer = ErrorInfo("WorkerDied", str(exc))
    finally:
        client.stop()
    return answer, tuple({"stream": o.stream, "text": o.text} for o in client.outputs.get(compute_id, []))


@dataclass(frozen=True)
class CatchUp:
    computes: int = 0
    events: int = 0
    error: ErrorInfo | None = None
    more: bool = False  # still behind after the most computes one read takes


MAX_CATCH_UP = 100  # computes one read may take, as through the engine (each reads at most a batch)


def catch_up(home: Path, name: str, bind: dict[str, Any] | None = None, *, stderr: Any = None) -> CatchUp:
    """With no engine: compute a lazy sense in one-off workers while its sources hold events it has not
    consumed (for `bind`'s values); none when nothing waits."""
    config = load_config(home)
    filters = reading(config, name).filters(bind)
    sources, binding = sources_of(config).get(name) or {}, binding_key(bind)
    done = CatchUp()
    for _ in range(MAX_CATCH_UP):
        if not has_backlog(Layout(home).data, name, sources, filters, binding):
            return done
        result = compute_standalone(home, name, bind=bind, reason=READ, stderr=stderr)
        done = CatchUp(done.computes + 1, done.events + result.events, result.error)
        if result.error is not None:
            return done
    return CatchUp(done.computes, done.events, None, True)


def _peer_read(home: Path, message: ReadPeer, stderr: Any) -> str | None:
    """A one-off compute reads a lazy peer: bring it up to date in one-off workers too."""
    try:
        done = catch_up(home, message.peer, message.bind, stderr=stderr)
    except NerveError as exc:
        return str(exc)
    return None if done.error is None else done.error.summary()


def _not_started() -> dict[str, Any]:
    return {"run_id": None, "status": "not_started",
            "reason": "no engine is running: a directive starts a thread only through the engine (`nerve run`)"}


def _user_output(line: str) -> None:
    if not line.startswith(LOG_PREFIX):
        sys.stderr.write(line)
        sys.stderr.flush()


class _Recorder:
    """Writes the run to logs.db as the engine would (only used when no engine runs)."""

    def __init__(self, home: Path, name: str, reason: Reason = DEMAND) -> None:
        self.path = Layout(home).logs_db
        self.name = name
        self.reason = reason

    def start(self) -> None:
        self._write([logrows.run_start(self.name, 0, self.reason, standalone=True)])

    def finish(self, result: ComputeResult) -> None:
        rows: list[LogRow] = []
        if result.output:
            rows.append(logrows.output(self.name, 0, list(result.output), standalone=True))
        if result.error is not None:
            e = result.error
            rows.append(logrows.error(self.name, e.message, sense=self.name, error_type=e.type,
                                      traceback=e.traceback, file=e.file, line=e.line))
        rows.append(logrows.run_complete(self.name, 0, result.outcome, self.reason,
                                         duration_ms=result.duration_ms or 0.0, signal_id=result.signal_id,
                                         events=result.events, standalone=True))
        self._write(rows, result.signal_id)

    def _write(self, rows: list[LogRow], signal_id: int | None = None) -> None:
        with LogStore(self.path) as store:
            for row in rows:
                # the signal's watermark goes with its row, so the next engine does not log it again
                last = row.kind is LogKind.RUN_COMPLETE and signal_id is not None
                store.write(row, mark=signal_mark(self.name, signal_id) if last and signal_id else None)
