"""The transaction contract of one compute.

One transaction per compute on the sense's own connection (`BEGIN IMMEDIATE`):
- a value → it must encode as JSON within `MAX_PAYLOAD`; its `_signals` row is
  inserted and the transaction COMMITs, then the worker sends `Signal`;
- `KEEP` → COMMIT without a signal → `Silent(kept=True)`;
- `None` (or `SenseResult(None)`) → the compute's rows roll back → `Silent`;
- an exception, or a payload that is not JSON or too large → ROLLBACK → `Error`.

A dry run (`Job.dry_run`) is the same compute, its writes recorded
(`worker.rehearsal`) and everything rolled back where it would COMMIT; its
events are the real ones, or the sample it was given.

A compute that takes a third parameter also receives its events (see
`worker.events`): they are read right after BEGIN, and the cursors move in the
same transaction — with the rows on a value or KEEP, alone on None (the
compute's rows are rolled back to a savepoint taken after the read).

Cancellation (the kernel's soft timeout) races with the end of a compute; a
`Job` settles that race under a lock: either the compute settles first (and its
own answer is sent), or the cancel does (whatever the compute does afterwards is
rolled back, and the worker answers `Error(TimeoutError)` once it has stopped).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import orjson

from nerve_cli.automaton.directive import SenseResult
from nerve_cli.clock import now_ms
from nerve_cli.schema.drift import missing_object, sql_hint
from nerve_cli.store import fanout
from nerve_cli.store.bindings import read_binding
from nerve_cli.store.events import Cursor, content_hash
from nerve_cli.store.sensedb import Peers, SenseDB
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import Reason
from nerve_cli.vocab.states import JobState
from nerve_cli.wire.protocol import MAX_PAYLOAD, ErrorInfo, payload_too_large
from nerve_cli.worker.events import KEEP, SAVEPOINT, Batch, EventReader, Trigger, commit_cursors, read_cursors, sample_events
from nerve_cli.worker.evidence import name_compute_thread
from nerve_cli.worker.failure import error_info, shown_path
from nerve_cli.worker.rehearsal import watch_writes, writes

if TYPE_CHECKING:
    import asyncio

    from nerve_cli.store.dbwatch import WatchReader

_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
PROGRESS_STEPS = 1000  # SQLite VM steps between checks of the cancel flag


@dataclass
class LoadedSense:
    """A sense ready to compute in this worker."""

    name: str
    folder: Path
    home: Path
    db: SenseDB
    peers: Peers
    compute: Callable[..., Any]
    is_async: bool
    nargs: int
    lock: asyncio.Lock | None = None  # an async sense's one-at-a-time, made on the loop (see run_async)
    events: EventReader | None = None  # set when the compute takes `trigger`
    # its database file as opened (device, inode), and how to open it again from the migrations when the file
    # was deleted or replaced under the worker (`nerve`'s "delete NAME.db and it is rebuilt")
    db_file: tuple[int, int] | None = None
    # and its -wal as it was after the first commit: a -wal deleted under an open connection takes every commit
    # since the last checkpoint with it (deleting NAME.db, NAME.db-wal and NAME.db-shm one after the other can
    # delete the -wal of the database just built again in place of the first)
    wal_file: tuple[int, int] | None = None
    reopen: Callable[[], SenseDB] | None = None
    on_rebuilt: Callable[[str, str], None] | None = None  # (sense, why): told to the kernel
    created: bool = False  # its database did not exist when the worker opened it: made empty now
    rehearsal_copy: bool = False  # a dry-run worker computing on an in-memory copy of its database
    rehearsal_blobs: dict[str, int] | None = None  # a dry-run worker: sha256 → bytes its computes put
    signal_version: str | None = None  # what its signals carry as events: their schema version,
    signal_hash: bool = False  # and their payload's content hash (senses.NAME.signal_version / signal_hash)
    # the engine's watch of data/senses (store.dbwatch), and the number it read at the last full check that
    # found the files its own (-1: none since the database was opened)
    watch: WatchReader | None = None
    _quiet_at: int = -1
    _paths_of: Path | None = dataclasses.field(default=None, repr=False)  # (see _paths)
    _path_strs: tuple[str, str] = ("", "")

    @property
    def takes_trigger(self) -> bool:
        return self.nargs >= 3

    def db_replaced(self) -> bool:
        """Whether the file at the database's path is no longer the one this worker writes (deleted, replaced)."""
        if self.db_file is None or self.db.path is None:
            return False
        quiet = self.watch.quiet() if self.watch is not None else -1
        if quiet >= 0 and quiet == self._quiet_at:  # no name along its path came or went since that check
            return False
        db_path, wal_path = self._paths()
        try:
            found = os.stat(db_path)
        except FileNotFoundError:
            return True
        if (found.st_dev, found.st_ino) != self.db_file:
            return True
        if self.wal_file is not None and file_id(wal_path) != self.wal_file:
            return True
        self._quiet_at = quiet  # read before the stats: a change after them is still pending or counted
        return False

    def _paths(self) -> tuple[str, str]:
        """The database's and its -wal's paths as strings, made once per database opened: asked twice per
        compute, a pathlib join cost more than the stat itself (on the hop: tests of bench/engine_hop.py)."""
        path = self.db.path
        if self._paths_of is not path:
            self._paths_of, self._path_strs = path, (str(path), str(path) + "-wal")
        return self._path_strs

    def committed(self) -> None:
        """After a COMMIT: the -wal it went to is now this database's (noted once: it lives as long as the
        worker's connection, which keeps it)."""
        if self.wal_file is None and self.db_file is not None and self.db.path is not None:
            self.wal_file = file_id(self._paths()[1])

    def rebuild_db(self) -> None:
        """Open the database afresh (built from the migrations when missing) in place of a deleted one."""
        if self.reopen is None:
            return
        self.db.close()
        self.db = self.reopen()
        self.db_file, self.wal_file, self._quiet_at = file_id(self.db.path), None, -1
        if self.on_rebuilt is not None:
            self.on_rebuilt(self.name, "its database file was deleted or replaced while the engine ran")

    def args(self, trigger: Trigger | None = None) -> tuple[Any, ...]:
        return (self.db, self.peers, trigger)[: self.nargs]

    def close(self) -> None:
        self.peers.close()
        if self.events is not None:
            self.events.close()
        self.db.close()


def signature_problem(fn: Callable[..., Any]) -> str | None:
    """Why `fn` cannot serve as a compute (called as `compute(db, peers[, trigger])`), or None when it can."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return "compute is a generator (it uses `yield`); return the signal's value instead"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing to check
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) > 3:
        return (f"compute takes {len(required)} required arguments ({', '.join(required)}) but is called as "
                "compute(db, peers, trigger); take at most those three (or fewer)")
    keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword:
        return f"compute has required keyword-only argument(s) {', '.join(keyword)}; Nerve passes none: give them defaults"
    return None


def compute_arity(fn: Callable[..., Any]) -> int:
    """How many of (db, peers, trigger) `fn` takes: `compute()` … `compute(db, peers, trigger)` all work.

    `*args` counts as two, as it always did: a trigger is given only to a
    compute that names a third parameter.
    """
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return min(len(positional), 3)


class Job:
    """One compute request and the settle-or-cancel race around it."""

    def __init__(self, id: int, sense: str, reason: Reason, sources: dict[str, str] | None = None,
                 filters: dict[str, dict[str, Any]] | None = None, bind: dict[str, Any] | None = None, *,
                 dry_run: bool = False, sample: list[dict[str, Any]] | None = None) -> None:
        self.id = id
        self.sense = sense
        self.reason = reason
        self.sources = sources or {}
        self.dry_run = dry_run
        self.sample = sample  # a dry run's events instead of its sources' unconsumed ones
        self.cursors_before: dict[str, Cursor] = {}  # a dry run: where its cursors stood
        self.filters = filters or {}
        self.bind = bind or {}
        self.batch = Batch()  # the events this compute was given
        self.outgoing: fanout.Outgoing | None = None  # what it emits (store.fanout), from its BEGIN
        self.received = time.perf_counter()
        self.started: float | None = None
        self.state = JobState.QUEUED
        self.task: asyncio.Future[Any] | None = None
        self.answered = False  # exactly one answer per compute, whatever path sends it
        self.waiting = False  # queued behind another compute of the same sense
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.state is JobState.CANCELLED

    def start(self) -> bool:
        with self._lock:
            if self.state is not JobState.QUEUED:
                return False
            self.state = JobState.RUNNING
            self.started = time.perf_counter()
            return True

    def cancel(self) -> JobState | None:
        """Cancel if not settled yet; returns the state it was cancelled in (queued or running), else None."""
        with self._lock:
            if self.state in (JobState.QUEUED, JobState.RUNNING):
                was, self.state = self.state, JobState.CANCELLED
                return was
            return None

    def settle(self) -> bool:
        """True when the compute's own outcome wins and must be sent (checked before COMMIT)."""
        with self._lock:
            if self.state in (JobState.RUNNING, JobState.SETTLED):
                self.state = JobState.SETTLED
                return True
            return False

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - (self.started or self.received)) * 1000, 3)


@dataclass(frozen=True)
class Answer:
    """What a compute ends with, before it is sent: its outcome, or None when it was abandoned (the cancel answered)."""

    kind: Outcome | None
    payload: Any = None
    ts: int = 0
    workflow: str | None = None
    error: ErrorInfo | None = None
    signal_id: int | None = None
    kept: bool = False
    writes: dict[str, Any] | None = None  # a dry run: what it would have written, per table
    emits: tuple[dict[str, Any], ...] = ()  # what it emitted (store.fanout), committed with it (a dry run: would)


ABANDONED = Answer(None)


def run_sync(sense: LoadedSense, job: Job) -> Answer:
    """A sync compute, start to finish, in the calling (worker pool) thread."""
    if not _begin(sense, job):
        return ABANDONED
    name_compute_thread(job.id)
    emitting = fanout.collecting(job.outgoing)
    try:
        result = sense.compute(*sense.args(_trigger(sense, job)))
        if inspect.isawaitable(result):
            _close_awaitable(result)
            raise TypeError("compute returned an awaitable: declare it `async def compute(db, peers)`")
    except BaseException as exc:  # user code may raise anything, SystemExit included
        return _fail(sense, job, exc)
    finally:
        fanout.stop(emitting)
    return _finish(sense, job, result)


def async_lock(sense: LoadedSense) -> asyncio.Lock:
    """The lock that runs an async sense's computes one at a time (made on first use, on the loop)."""
    import asyncio  # only a worker with an async sense pays for it

    if sense.lock is None:
        sense.lock = asyncio.Lock()
    return sense.lock


async def run_async(sense: LoadedSense, job: Job) -> Answer:
    """An `async def` compute as its own task, so a cancel can reach it."""
    import asyncio  # only a worker with an async sense pays for it

    if not _begin(sense, job):
        return ABANDONED
    try:
        args = sense.args(_trigger(sense, job))
    except BaseException as exc:
        return _fail(sense, job, exc)
    emitting = fanout.collecting(job.outgoing)  # (the task takes a copy of the context as it is made)
    try:
        job.task = asyncio.ensure_future(sense.compute(*args))
    finally:
        fanout.stop(emitting)
    try:
        result = await job.task
    except asyncio.CancelledError:
        if not job.cancelled:
            _rollback(sense)
            raise  # the worker itself is being torn down
        return _fail(sense, job, TimeoutError("cancelled"))
    except BaseException as exc:
        return _fail(sense, job, exc)
    return _finish(sense, job, result)


def file_id(path: Path | str | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _begin(sense: LoadedSense, job: Job) -> bool:
    if not job.start():
        return False
    if sense.db_replaced():  # written to now, an unlinked file would take the compute's rows with it
        sense.rebuild_db()
    conn = sense.db.conn
    conn.set_progress_handler(lambda: job.state is JobState.CANCELLED, PROGRESS_STEPS)
    sense.peers.progress_handler = lambda: job.state is JobState.CANCELLED
    sense.peers.begin()  # a lazy peer is brought up to date again at its first read in this compute
    conn.execute("BEGIN IMMEDIATE")
    job.outgoing = fanout.Outgoing(conn, sense.name)
    return True


def _trigger(sense: LoadedSense, job: Job) -> Trigger | None:
    """Read the compute's events inside its transaction (only for a compute that takes them)."""
    if job.dry_run:  # here, inside the caller's try: a failure is the compute's error, answered like any
        watch_writes(sense.db.conn)
    if not sense.takes_trigger:
        return None
    if job.sample is not None:
        job.batch = Batch(sample_events(job.sample))
    elif sense.events is not None and (job.sources or job.bind):
        job.batch = sense.events.read(sense.db.conn, job.sources, job.filters, job.bind)
        if job.dry_run:
            binding = job.batch.binding
            job.cursors_before = read_cursors(sense.db.conn) if binding is None else read_binding(sense.db.conn, binding)[0]
    if job.batch.consumes:
        sense.db.conn.execute(f"SAVEPOINT {SAVEPOINT}")  # None rolls back to here and keeps the cursors
    return Trigger(job.reason.kind, job.reason.source, job.batch.events, tuple(job.sources), job.batch.more, job.id,
                   sense.home, params=dict(job.bind))


def _finish(sense: LoadedSense, job: Job, result: Any) -> Answer:
    if result is KEEP:
        return _commit(sense, job, Answer(Outcome.SILENT, kept=True))
    payload, workflow = (result.payload, result.workflow) if isinstance(result, SenseResult) else (result, None)
    if payload is KEEP:
        return _commit(sense, job, Answer(Outcome.SILENT, kept=True))
    if payload is None:
        if job.batch.consumes:
            return _consumed_only(sense, job)
        return _rolled_back(sense, job, Answer(Outcome.SILENT))
    try:
        encoded = orjson.dumps(payload, option=_JSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        return _rolled_back(sense, job, Answer(Outcome.ERROR, error=_not_json(sense, payload, exc)))
    wf = workflow if workflow is None or isinstance(workflow, str) else repr(workflow)
    size = len(encoded) + (len(orjson.dumps(wf)) if wf else 0)
    if size > MAX_PAYLOAD:  # its Signal line could not reach the kernel: refuse it before anything is stored
        return _rolled_back(sense, job, Answer(Outcome.ERROR, error=_too_large(sense, size)))
    if not sense.db.conn.in_transaction:
        return _rolled_back(sense, job, Answer(Outcome.ERROR, error=_txn_ended(sense)))
    ts = now_ms()
    try:
        digest = content_hash(payload) if sense.signal_hash else None
        signal_id = sense.db.record_signal(ts, encoded, sense.signal_version, digest)
    except BaseException as exc:
        return _fail(sense, job, exc)
    # the Signal line embeds the JSON already stored: no decode and re-encode on the hop
    return _commit(sense, job, Answer(Outcome.SIGNAL, payload=orjson.Fragment(encoded), ts=ts, workflow=wf,
                                       signal_id=signal_id), encoded)


def _commit(sense: LoadedSense, job: Job, outcome: Answer, value: bytes | None = None) -> Answer:
    """COMMIT the compute's rows and cursors (and a bound read's new value), unless a cancel won the race or
    the transaction is gone."""
    conn = sense.db.conn
    if not conn.in_transaction:
        return _rolled_back(sense, job, Answer(Outcome.ERROR, error=_txn_ended(sense)))
    emits = tuple(job.outgoing.items) if job.outgoing is not None else ()
    if job.dry_run:  # what it wrote and would emit, then nothing of it stays
        return _rolled_back(sense, job, dataclasses.replace(outcome, writes=writes(conn), emits=emits))
    try:
        commit_cursors(conn, job.batch, now_ms(), value)
        if not job.settle():
            return _rolled_back(sense, job, ABANDONED)
        _quiet(sense)
        conn.execute("COMMIT")
    except BaseException as exc:
        return _fail(sense, job, exc)
    replaced = sense.db_replaced()
    if not replaced:
        sense.committed()
    if replaced:  # deleted while it computed: what it committed went with the unlinked file
        sense.wal_file = None  # (its -wal too, maybe: the rebuild before the next compute notes the new one)
        return Answer(Outcome.ERROR, error=ErrorInfo(
            "DatabaseDeleted", f"{sense.db.path} was deleted while this compute ran: its rows and its signal went "
            "with the deleted file and nothing was sent; the database is built again before the next compute"))
    return dataclasses.replace(outcome, emits=emits) if emits else outcome


def _consumed_only(sense: LoadedSense, job: Job) -> Answer:
    """None after events: drop the compute's own rows, keep the cursors (the events were looked at)."""
    conn = sense.db.conn
    try:
        conn.execute(f"ROLLBACK TO {SAVEPOINT}")
    except Exception:  # the compute ended Nerve's transaction or its savepoint itself
        return _rolled_back(sense, job, Answer(Outcome.ERROR, error=_txn_ended(sense)))
    return _commit(sense, job, Answer(Outcome.SILENT))


def _fail(sense: LoadedSense, job: Job, exc: BaseException) -> Answer:
    info = error_info(exc, sense.folder, sense.home)
    if isinstance(exc, sqlite3.OperationalError) and missing_object(info.message):
        info = dataclasses.replace(info, message=sql_hint(info.message, sense.name))
    return _rolled_back(sense, job, Answer(Outcome.ERROR, error=info))


def _rolled_back(sense: LoadedSense, job: Job, outcome: Answer) -> Answer:
    """Roll back, then report `outcome` unless a cancel has already answered for this job."""
    _rollback(sense)
    if outcome is ABANDONED or not job.settle():
        return ABANDONED
    return outcome


def _rollback(sense: LoadedSense) -> None:
    _quiet(sense)
    if sense.db.conn.in_transaction:  # an interrupted statement may have ended it already
        sense.db.conn.execute("ROLLBACK")


def _quiet(sense: LoadedSense) -> None:
    """Remove the cancel check, so it can't interrupt our own COMMIT/ROLLBACK."""
    sense.db.conn.set_progress_handler(None, 0)


def _close_awaitable(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()  # avoid "coroutine was never awaited" noise


def _defined_at(sense: LoadedSense) -> tuple[str | None, int | None]:
    code = getattr(sense.compute, "__code__", None)
    if code is None:
        return None, None
    return shown_path(code.co_filename, sense.home), code.co_firstlineno


def _not_json(sense: LoadedSense, payload: Any, exc: Exception) -> ErrorInfo:
    file, line = _defined_at(sense)
    return ErrorInfo(
        type="TypeError",
        message=f"compute returned a {type(payload).__name__} that cannot be stored as JSON ({exc}); "
                "return numbers, strings, bools, lists, dicts or dataclasses of those",
        file=file, line=line,
    )


def _too_large(sense: LoadedSense, size: int) -> ErrorInfo:
    file, line = _defined_at(sense)
    return ErrorInfo(type="PayloadTooLarge", message=payload_too_large(size, "compute returned"), file=file, line=line)


def _txn_ended(sense: LoadedSense) -> ErrorInfo:
    file, line = _defined_at(sense)
    return ErrorInfo(
        type="SenseError",
        message="compute ended Nerve's transaction itself (COMMIT or ROLLBACK through db.sqlite/db.conn); "
                "its writes may be committed but no signal was recorded. Return a value to commit, None to roll back",
        file=file, line=line,
    )
