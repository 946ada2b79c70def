"""The rows of logs.db: every kind the engine writes, and the one function that builds each.

A row is (source, type, ref_id, payload); `LogKind` names each (source, type) pair the engine
writes, and the functions below are the only places a row's payload is put together, so a kind
reads the same wherever it is written (the engine, the ledger, a standalone `nerve sense run`,
`nerve thread approve` with the engine stopped). The values on disk are the ones `nerve logs`
has always shown; a new kind joins `LogKind` with its constructor here.

Thread rows (source `workflow`, ref_id the run id) whose type is a `ThreadStatus` also set the
thread's status in `workflow_runs` (`LogKind.status`).
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any, NamedTuple

from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import Reason
from nerve_cli.vocab.sources import CursorJump
from nerve_cli.vocab.states import ThreadStatus


class LogSource(StrEnum):
    """The `source` column: which part of the engine a row speaks for."""

    REFLEX = "reflex"      # computes: run_start, output, run_complete (ref_id: the sense)
    SIGNAL = "signal"      # external events: emit (ref_id: the channel)
    SYSTEM = "system"      # the engine's own life: start and stop, errors, workers, reloads, guards
    WORKFLOW = "workflow"  # a thread's events (ref_id: its run id)


class LogKind(Enum):
    """One kind of row: its source and its type."""

    # computes
    RUN_START = (LogSource.REFLEX, "run_start")
    """A compute started: compute_id, reason, lateness_ms.
    ref_id: sense"""
    OUTPUT = (LogSource.REFLEX, "output")
    """The lines a compute printed.
    ref_id: sense"""
    RUN_COMPLETE = (LogSource.REFLEX, "run_complete")
    """A compute ended: outcome (signal, silent, error, timeout, lost), duration, signal_id, events consumed.
    ref_id: sense"""
    FILES_CHANGED = (LogSource.REFLEX, "files_changed")
    """A file reflex saw a burst of changes: how many, the first paths.
    ref_id: sense"""
    # external events
    EMIT = (LogSource.SIGNAL, "emit")
    """An external event stored: payload, event_id, origin, schema_version, hash.
    ref_id: channel"""
    # the engine
    ENGINE_STARTED = (LogSource.SYSTEM, "engine_started")
    """The engine started: pid, senses, groups, event loop.
    ref_id: —"""
    ENGINE_STOPPED = (LogSource.SYSTEM, "engine_stopped")
    """The engine stopped: pid, uptime.
    ref_id: —"""
    WARNING = (LogSource.SYSTEM, "warning")
    """A nerve.yaml warning at start.
    ref_id: nerve.yaml"""
    ERROR = (LogSource.SYSTEM, "error")
    """Something failed: message, error_type, file, line, traceback.
    ref_id: sense, workflow or part"""
    CONTROL_BUSY = (LogSource.SYSTEM, "control_busy")
    """The control socket refused connections.
    ref_id: control"""
    WEBHOOKS_STARTED = (LogSource.SYSTEM, "webhooks_started")
    """The engine serves webhooks: url, channels.
    ref_id: —"""
    METRICS_BUSY = (LogSource.SYSTEM, "metrics_busy")
    """The metrics endpoint reached its connection cap.
    ref_id: metrics"""
    WEBHOOKS_BUSY = (LogSource.SYSTEM, "webhooks_busy")
    """The webhook server reached its cap of open connections or of request bytes being received: what, held, limit.
    ref_id: webhooks"""
    ARCHIVED = (LogSource.SYSTEM, "archived")
    """What the daily archive moved.
    ref_id: archive"""
    # the fleet (ref_id: this host's name in it; fleet_not_sent: the source)
    FLEET_CONNECTED = (LogSource.SYSTEM, "fleet_connected")
    """Joined the fleet's NATS server.
    ref_id: this host"""
    FLEET_DISCONNECTED = (LogSource.SYSTEM, "fleet_disconnected")
    """Lost it.
    ref_id: this host"""
    FLEET_NOT_SENT = (LogSource.SYSTEM, "fleet_not_sent")
    """A payload the NATS server refuses, logged once.
    ref_id: source"""
    # workers (a sense group's, ref_id the group; a workflow's, ref_id the workflow)
    WORKER_STARTED = (LogSource.SYSTEM, "worker_started")
    """A worker is ready: pid, senses, restarts.
    ref_id: group or workflow"""
    WORKER_EXITED = (LogSource.SYSTEM, "worker_exited")
    """A worker died: exit, what it was computing, blame.
    ref_id: group or workflow"""
    WORKER_KILLED = (LogSource.SYSTEM, "worker_killed")
    """The engine killed a worker: why.
    ref_id: group"""
    WORKER_RESPAWN = (LogSource.SYSTEM, "worker_respawn")
    """A workflow worker restarts after a back-off.
    ref_id: workflow"""
    MALFORMED = (LogSource.SYSTEM, "malformed")
    """A worker wrote a line that is not the protocol.
    ref_id: group"""
    WATCHDOG_KILL = (LogSource.SYSTEM, "watchdog_kill")
    """A worker over its memory or CPU limit was stopped.
    ref_id: group"""
    # guards
    PENALISED = (LogSource.SYSTEM, "penalised")
    """A failing sense is backed off.
    ref_id: sense"""
    QUARANTINED = (LogSource.SYSTEM, "quarantined")
    """A sense that kills its worker is not computed for a while.
    ref_id: sense"""
    CAUSAL_REFUSED = (LogSource.SYSTEM, "causal_refused")
    """A directive or an emit past its causal depth bound was refused (once per chain; later ones are counted):
    what (directive, emit, publish), target, depth, bound, path (the chain's hops from its outside root), sense.
    ref_id: the sense whose compute asked, else the target"""
    SENSE_PAUSED = (LogSource.SYSTEM, "sense_paused")
    """`nerve sense pause` (MCP `pause_sense`): its computes stop and its events wait, across restarts; nothing
    cascades. by, via.
    ref_id: sense"""
    SENSE_RESUMED = (LogSource.SYSTEM, "sense_resumed")
    """`nerve sense resume`: it computes again (once, for whatever waited), paused_ms. by, via.
    ref_id: sense"""
    RESET = (LogSource.SYSTEM, "reset")
    """`nerve sense reset` lifted that.
    ref_id: sense"""
    CURSOR_MOVED = (LogSource.SYSTEM, "cursor_moved")
    """`nerve sense replay` moved a cursor back: source, from, to, events waiting.
    ref_id: sense"""
    CURSOR_RESTARTED = (LogSource.SYSTEM, "cursor_restarted")
    """A listener's cursor does not fit its source's database: `why` rebuilt (another identity: it restarts at the
    new one's first event) or restored (an earlier copy put back, ids behind the cursor: it reads after
    `reads_from`, the last event it had); source, was_at, identity_was, identity_now, why, reads_from.
    ref_id: sense"""
    SENSE_DB_CREATED = (LogSource.SYSTEM, "sense_db_created")
    """A sense that ran before got a new empty database (deleted while the engine ran, or missing at start): path, why,
    had_history.
    ref_id: sense"""
    # freshness (expect_signal_every)
    SENSE_STALE = (LogSource.SYSTEM, "sense_stale")
    """A sense did not signal within its `expect_signal_every`.
    ref_id: sense"""
    SENSE_FRESH = (LogSource.SYSTEM, "sense_fresh")
    """A stale sense signalled again.
    ref_id: sense"""
    # hot reload
    CONFIG_RELOADED = (LogSource.SYSTEM, "config_reloaded")
    """A saved nerve.yaml was applied: the changes.
    ref_id: nerve.yaml"""
    CONFIG_REJECTED = (LogSource.SYSTEM, "config_rejected")
    """A saved nerve.yaml was refused: every problem.
    ref_id: nerve.yaml"""
    CONFIG_UNCHANGED = (LogSource.SYSTEM, "config_unchanged")
    """A save that changed nothing.
    ref_id: nerve.yaml"""
    SENSE_RELOADED = (LogSource.SYSTEM, "sense_reloaded")
    """A sense's files changed: its worker restarted.
    ref_id: group"""
    WORKFLOW_RELOADED = (LogSource.SYSTEM, "workflow_reloaded")
    """A workflow's file changed: its worker restarted.
    ref_id: workflow"""
    # threads: a message of the chain, and each status a thread takes
    THREAD_MESSAGE = (LogSource.WORKFLOW, "message")
    """One message of its chain: the start message, a role's round (`round`), a person's answer.
    ref_id: run id"""
    ROLE_FAILED = (LogSource.WORKFLOW, "role_failed")  # an attempt of a role failed and is retried: not a status
    """An attempt of a role failed and is retried (role, attempt of attempts, reason, error, the pause before the next):
    part of its story, not a status.
    ref_id: run id"""
    THREAD_QUEUED = (LogSource.WORKFLOW, ThreadStatus.QUEUED.value)
    """A thread was asked for (prompt, max_rounds, origin), or queued again after a person's answer.
    ref_id: run id"""
    THREAD_STARTED = (LogSource.WORKFLOW, ThreadStatus.STARTED.value)
    """A worker took it (or resumed it).
    ref_id: run id"""
    THREAD_WAITING = (LogSource.WORKFLOW, ThreadStatus.WAITING.value)
    """It waits for a person: the question.
    ref_id: run id"""
    THREAD_COMPLETED = (LogSource.WORKFLOW, ThreadStatus.COMPLETED.value)
    """It ended: END, or max_rounds.
    ref_id: run id"""
    THREAD_FAILED = (LogSource.WORKFLOW, ThreadStatus.FAILED.value)
    """It ended with a failure: the reason.
    ref_id: run id"""
    THREAD_CRASHED = (LogSource.WORKFLOW, ThreadStatus.CRASHED.value)
    """Its worker or the engine died and it could not resume.
    ref_id: run id"""
    THREAD_DROPPED = (LogSource.WORKFLOW, ThreadStatus.DROPPED.value)
    """Refused or pushed out by its workflow's `overflow`.
    ref_id: run id"""
    THREAD_CANCELLED = (LogSource.WORKFLOW, ThreadStatus.CANCELLED.value)
    """A person cancelled it (`nerve thread cancel`, MCP `cancel_thread`): reason, by, via.
    ref_id: run id"""
    THREAD_PAUSED = (LogSource.WORKFLOW, ThreadStatus.PAUSED.value)
    """Someone paused it (`nerve thread pause`, MCP `pause_thread`): was (queued, started, waiting), by, via, rounds.
    `nerve thread resume` queues it again (or, if its chain waits, makes it wait again): that row carries
    `resumed_from: paused`.
    ref_id: run id"""

    def __init__(self, source: LogSource, type_: str) -> None:
        self.source = source
        self.source_text: str = source.value  # the column's value, read per row without the enum's descriptor
        self.type = type_
        # the thread status a row of this kind sets in workflow_runs, if any (looked up once, not per row)
        self.status: ThreadStatus | None = (ThreadStatus(type_) if source is LogSource.WORKFLOW
                                            and type_ in {s.value for s in ThreadStatus} else None)

    @classmethod
    def of_status(cls, status: ThreadStatus) -> LogKind:
        return _BY_STATUS[status]


_BY_STATUS = {kind.status: kind for kind in LogKind if kind.status is not None}


class LogRow(NamedTuple):
    """One row to append to logs.db (its time is given when it is appended). A tuple: a hop writes two."""

    kind: LogKind
    ref: str | None
    payload: dict[str, Any] | None

    @property
    def source(self) -> str:
        return self.kind.source.value

    @property
    def type(self) -> str:
        return self.kind.type


# -- computes -------------------------------------------------------------------------------

def run_start(sense: str, compute_id: int, reason: Reason, *, lateness_ms: float | None = None,
              standalone: bool = False) -> LogRow:
    """A compute started (`standalone`: by `nerve sense run` with no engine)."""
    body: dict[str, Any] = {"compute_id": compute_id, "reason": reason.text}
    if lateness_ms is not None:
        body["lateness_ms"] = lateness_ms
    if standalone:
        body["standalone"] = True
    return LogRow(LogKind.RUN_START, sense, body)


def output(sense: str, compute_id: int, lines: list[dict[str, str]], *, standalone: bool = False) -> LogRow:
    """What a compute printed: `lines` of {"stream": stdout|stderr, "text"}."""
    body: dict[str, Any] = {"compute_id": compute_id, "lines": lines}
    if standalone:
        body["standalone"] = True
    return LogRow(LogKind.OUTPUT, sense, body)


def run_complete(sense: str, compute_id: int | None, outcome: Outcome, reason: Reason | None, *,
                 duration_ms: float | None = None, signal_id: int | None = None, discarded: bool = False,
                 kept: bool = False, events: int = 0, standalone: bool = False) -> LogRow:
    """A compute ended. `reason` None: a signal found committed without its row (the ledger recovered it);
    its reason is unknown and shows as `recovered`."""
    body: dict[str, Any] = {"compute_id": compute_id, "outcome": outcome}  # a StrEnum: serialised as its value
    if duration_ms is not None:
        body["duration_ms"] = round(duration_ms, 3)
    body["reason"] = reason.text if reason is not None else "recovered"
    if discarded:
        body["discarded"] = True
    if signal_id is not None:
        body["signal_id"] = signal_id
    if kept:
        body["kept"] = True
    if events:
        body["events"] = events
    if standalone:
        body["standalone"] = True
    if reason is None:
        body["recovered"] = True
    return LogRow(LogKind.RUN_COMPLETE, sense, body)


def files_changed(sense: str, reflex: int, paths: list[dict[str, str]], shown: int = 20) -> LogRow:
    """A file reflex recorded a burst of changes for `sense`: how many, and the first `shown` of `paths`
    ({pattern, path, change})."""
    return LogRow(LogKind.FILES_CHANGED, sense, {"reflex": reflex, "changes": len(paths), "paths": paths[:shown]})


def emit(channel: str, payload: Any, event_id: int, *, recovered: bool = False, origin: str | None = None,
         via: str | None = None, schema_version: str | None = None, hash: str | None = None) -> LogRow:
    """An external event stored (`recovered`: stored while no engine logged it; `origin`: the fleet host it was
    received from; `via`: how it arrived here when not by `nerve emit`, the socket or MCP: "webhook";
    `schema_version` and `hash`: what its emitter gave)."""
    body: dict[str, Any] = {"payload": payload, "event_id": event_id}
    if recovered:
        body["recovered"] = True
    if origin is not None:
        body["origin"] = origin
    if via is not None:
        body["via"] = via
    if schema_version is not None:
        body["schema_version"] = schema_version
    if hash is not None:
        body["hash"] = hash
    return LogRow(LogKind.EMIT, channel, body)


# -- the engine -----------------------------------------------------------------------------

def engine_started(pid: int, senses: list[str], groups: list[str], loop: str) -> LogRow:
    return LogRow(LogKind.ENGINE_STARTED, None, {"pid": pid, "senses": senses, "groups": groups, "loop": loop})


def engine_stopped(pid: int, uptime_s: float) -> LogRow:
    return LogRow(LogKind.ENGINE_STOPPED, None, {"pid": pid, "uptime_s": uptime_s})


def warning(where: str, message: str) -> LogRow:
    return LogRow(LogKind.WARNING, where, {"message": message})


def error(ref: str | None, message: str | None, **context: Any) -> LogRow:
    """Something failed. `ref`: the sense, workflow or part it concerns; `context`: what a reader needs to
    act (error_type, traceback, file, line, compute_id, sense, workflow, blamed...)."""
    return LogRow(LogKind.ERROR, ref, {**context, "message": message})


def fleet_connected(host: str, server: str | None, stream: str) -> LogRow:
    """This host's link to its fleet is up: connected to `server`, the stream ready."""
    return LogRow(LogKind.FLEET_CONNECTED, host, {"server": server, "stream": stream})


def fleet_disconnected(host: str, error: str) -> LogRow:
    """This host's link to its fleet went down (written once per outage, not per retry)."""
    return LogRow(LogKind.FLEET_DISCONNECTED, host, {"error": error})


def fleet_not_sent(name: str, kind: str, row_id: int, size: int, max_payload: int, message: str) -> LogRow:
    """A published signal or emit too large for the NATS server: skipped, so its source is not held up."""
    return LogRow(LogKind.FLEET_NOT_SENT, name, {"kind": kind, "id": row_id, "bytes": size,
                                                 "max_payload": max_payload, "message": message})


def causal_refused(what: str, target: str, depth: int, bound: int, path: list[str], sense: str | None) -> LogRow:
    """A chain of causes reached `depth`, past `bound`: its `what` (a directive, an emit) to `target` is refused."""
    return LogRow(LogKind.CAUSAL_REFUSED, sense or target, {"what": what, "target": target, "depth": depth,
                                                             "bound": bound, "path": path, "sense": sense})


def control_busy(connections: int, limit: int, idle_timeout_s: float) -> LogRow:
    return LogRow(LogKind.CONTROL_BUSY, "control", {"connections": connections, "limit": limit,
                                                    "idle_timeout_s": idle_timeout_s})


def webhooks_started(url: str, channels: list[str]) -> LogRow:
    """The engine serves POST /emit/CHANNEL at `url` for `channels` (those with `webhook: true`)."""
    return LogRow(LogKind.WEBHOOKS_STARTED, None, {"url": url, "channels": channels})


def metrics_busy(connections: int, limit: int) -> LogRow:
    """The metrics endpoint reached its connection cap and closes new connections until some end."""
    return LogRow(LogKind.METRICS_BUSY, "metrics", {"connections": connections, "limit": limit})


def webhooks_busy(what: str, held: int, limit: int) -> LogRow:
    """The webhook server reached a bound (`what`: "connections" open, or "bytes" of request bodies being
    received) and answers 503 to more until it falls to half; once per siege."""
    return LogRow(LogKind.WEBHOOKS_BUSY, "webhooks", {"what": what, "held": held, "limit": limit})


def archived(result: dict[str, Any]) -> LogRow:
    """The daily archive ran: what it moved (`ArchiveResult.as_dict()`)."""
    return LogRow(LogKind.ARCHIVED, "archive", result)


# -- workers --------------------------------------------------------------------------------

def worker_started(ref: str, pid: int | None, **detail: Any) -> LogRow:
    """A worker is ready: start (WorkerStart). A sense group's: senses, restarts, failed; a workflow's: workflow."""
    return LogRow(LogKind.WORKER_STARTED, ref, {"pid": pid, **detail})


def worker_exited(ref: str, pid: int | None, **detail: Any) -> LogRow:
    """A worker exited. A sense group's: why, code, respawn_in, computing, stderr, blamed;
    a workflow's: workflow, exit, threads."""
    return LogRow(LogKind.WORKER_EXITED, ref, {"pid": pid, **detail})


def worker_killed(ref: str, pid: int | None, sense: str, why: str) -> LogRow:
    return LogRow(LogKind.WORKER_KILLED, ref, {"pid": pid, "sense": sense, "why": why})


def worker_respawn(workflow: str, attempt: int, delay_s: float) -> LogRow:
    return LogRow(LogKind.WORKER_RESPAWN, workflow, {"workflow": workflow, "attempt": attempt, "delay_s": delay_s})


def malformed(group: str, pid: int | None, problem: str, line: str) -> LogRow:
    """A worker wrote a line that is not a protocol message."""
    return LogRow(LogKind.MALFORMED, group, {"pid": pid, "problem": problem, "line": line})


def watchdog_kill(group: str, pid: int, problem: str, computing: list[str],
                  blamed: dict[str, str] | None = None) -> LogRow:
    """`blamed`: {sense, because}, the sense whose code used what broke the limit, or None when none can be named."""
    return LogRow(LogKind.WATCHDOG_KILL, group, {"group": group, "pid": pid, "problem": problem,
                                                 "computing": computing, "blamed": blamed})


# -- guards ---------------------------------------------------------------------------------

def penalised(sense: str, until: float, why: str) -> LogRow:
    return LogRow(LogKind.PENALISED, sense, {"sense": sense, "until": until, "why": why})


def quarantined(sense: str, until: float, why: str) -> LogRow:
    return LogRow(LogKind.QUARANTINED, sense, {"sense": sense, "until": until, "why": why})


def sense_paused(sense: str, by: str, via: str | None) -> LogRow:
    return LogRow(LogKind.SENSE_PAUSED, sense, {"sense": sense, "by": by, "via": via})


def sense_resumed(sense: str, by: str, via: str | None, paused_ms: int | None) -> LogRow:
    return LogRow(LogKind.SENSE_RESUMED, sense, {"sense": sense, "by": by, "via": via, "paused_ms": paused_ms})


def reset(sense: str, was_blocked: bool) -> LogRow:
    return LogRow(LogKind.RESET, sense, {"sense": sense, "was_blocked": was_blocked})


def cursor_moved(sense: str, source: str, kind: str, from_id: int, to_id: int, events: int, by: str) -> LogRow:
    """`nerve sense replay` moved `sense`'s cursor on `source` from event `from_id` back to `to_id`: `events`
    wait beyond it now."""
    return LogRow(LogKind.CURSOR_MOVED, sense, {"source": source, "kind": kind, "from_id": from_id, "to_id": to_id,
                                                "events": events, "by": by})


def cursor_restarted(sense: str, source: str, was_at: int, identity_was: str | None, identity_now: str | None,
                     why: CursorJump = CursorJump.REBUILT, reads_from: int = 0) -> LogRow:
    """`sense`'s cursor on `source` (at `was_at`) does not fit the source's database any more, `why`:

    - rebuilt: the file was deleted and built again (another identity, ids from 1 again): the cursor restarts
      at the start of the new one and receives every event it holds; what the old one held beyond `was_at`
      and never reached it went with it.
    - restored: the same database put back from an earlier copy (`nerve backup`): its ids are behind the
      cursor and go on from the copy's newest. It reads after `reads_from`, the last event it had when it
      wrote its cursor: every event made since is received, once; what the lost lineage held past the copy
      went with it."""
    outcome = ("receives every event the rebuilt source holds, from its first" if why is CursorJump.REBUILT else
               f"receives the restored source's events after {reads_from}, the last it had: those made since")
    return LogRow(LogKind.CURSOR_RESTARTED, sense, {
        "source": source, "was_at": was_at, "identity_was": identity_was, "identity_now": identity_now,
        "why": why.value, "reads_from": reads_from, "outcome": outcome})


def sense_db_created(sense: str, path: str, why: str, had_history: bool) -> LogRow:
    """`sense`'s database was made empty (from its migrations) while it had run before: `why` (deleted while the
    engine ran, missing at start). As a listener it starts over: its cursors went with the old file."""
    return LogRow(LogKind.SENSE_DB_CREATED, sense, {"path": path, "why": why, "had_history": had_history})


def sense_stale(sense: str, expected_every_s: float, last_signal_ms: int | None) -> LogRow:
    """`sense` has not signalled within its expect_signal_every (last signal: `last_signal_ms`, or none seen)."""
    return LogRow(LogKind.SENSE_STALE, sense, {"expected_every_s": expected_every_s, "last_signal_ms": last_signal_ms})


def sense_fresh(sense: str, expected_every_s: float) -> LogRow:
    """A stale `sense` signalled again."""
    return LogRow(LogKind.SENSE_FRESH, sense, {"expected_every_s": expected_every_s})


# -- hot reload -----------------------------------------------------------------------------

def config_reloaded(changes: list[str], restarted_groups: list[str], warnings: list[str],
                    at_next_start: list[str] | None = None) -> LogRow:
    """A save of nerve.yaml applied: every change (a key path each), and the keys among them that only the
    engine's next start applies (`at_next_start`)."""
    return LogRow(LogKind.CONFIG_RELOADED, "nerve.yaml", {"changes": changes, "restarted_groups": restarted_groups,
                                                          "warnings": warnings, "at_next_start": at_next_start or []})


def config_rejected(problems: list[str], warnings: list[str]) -> LogRow:
    return LogRow(LogKind.CONFIG_REJECTED, "nerve.yaml", {"problems": problems, "warnings": warnings})


def config_unchanged(warnings: list[str]) -> LogRow:
    return LogRow(LogKind.CONFIG_UNCHANGED, "nerve.yaml", {"warnings": warnings})


def sense_reloaded(group: str, senses: list[str]) -> LogRow:
    return LogRow(LogKind.SENSE_RELOADED, group, {"senses": senses, "group": group})


def workflow_reloaded(workflow: str) -> LogRow:
    return LogRow(LogKind.WORKFLOW_RELOADED, workflow, {"workflow": workflow})


# -- threads --------------------------------------------------------------------------------

def thread_status(run_id: str, workflow: str, status: ThreadStatus, **detail: Any) -> LogRow:
    """A thread took `status`. `detail` by status: queued (prompt, max_rounds, via, answer...),
    started (max_rounds, or resumed and rounds), waiting (question or reason, waiting_for, rounds),
    completed/failed/crashed (reason, rounds, error), dropped (reason), cancelled (reason, by, rounds, was),
    paused (was, by, via, rounds)."""
    return LogRow(LogKind.of_status(status), run_id, {"workflow": workflow, **detail})


def role_failed(run_id: str, workflow: str, role: str, attempt: int, attempts: int, reason: str,
                retry_in_s: float, error: dict[str, Any] | None) -> LogRow:
    """Attempt `attempt` of `attempts` of a thread's role failed (`reason`, `error`); retried in `retry_in_s`.
    Part of the thread's story (`thread show`), not a status: workflow_runs does not change."""
    return LogRow(LogKind.ROLE_FAILED, run_id, {"workflow": workflow, "role": role, "attempt": attempt,
                                                "attempts": attempts, "reason": reason, "retry_in_s": retry_in_s,
                                                "error": error})


def thread_message(run_id: str, workflow: str, message: dict[str, Any], seq: int, **extra: Any) -> LogRow:
    """Message `seq` of a thread's chain (`extra`: its round, for a role's message)."""
    return LogRow(LogKind.THREAD_MESSAGE, run_id, {"workflow": workflow, **message, "seq": seq, **extra})
