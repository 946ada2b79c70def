"""The transaction contract of one compute.

One transaction per compute on the sense's own connection (`BEGIN IMMEDIATE`):
- a value → it must encode as JSON; its `_signals` row is inserted and the
  transaction COMMITs, then the worker sends `Signal`;
- `None` (or `SenseResult(None)`) → ROLLBACK, nothing stored → `Silent`;
- an exception, or a payload that is not JSON → ROLLBACK → `Error`.

Cancellation (the kernel's soft timeout) races with the end of a compute; a
`Job` settles that race under a lock: either the compute settles first (and its
own answer is sent), or the cancel does (whatever the compute does afterwards is
rolled back, and the worker answers `Error(TimeoutError)` once it has stopped).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

from nerve_cli.schema.drift import missing_object, sql_hint
from nerve_cli.store.sensedb import Peers, SenseDB
from nerve_cli.wire.protocol import MAX_PAYLOAD, ErrorInfo
from nerve_cli.worker.failure import error_info, shown_path
from nerve_cli.workflow.directive import SenseResult

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
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def args(self) -> tuple[Any, ...]:
        return (self.db, self.peers)[: self.nargs]

    def close(self) -> None:
        self.peers.close()
        self.db.close()


def signature_problem(fn: Callable[..., Any]) -> str | None:
    """Why `fn` cannot serve as a compute (called as `compute(db, peers)`), or None when it can."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return "compute is a generator (it uses `yield`); return the signal's value instead"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing to check
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) > 2:
        return (f"compute takes {len(required)} required arguments ({', '.join(required)}) but is called as "
                "compute(db, peers); take at most those two (or fewer)")
    keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword:
        return f"compute has required keyword-only argument(s) {', '.join(keyword)}; Nerve passes none: give them defaults"
    return None


def compute_arity(fn: Callable[..., Any]) -> int:
    """How many of (db, peers) `fn` takes: `compute()`, `compute(db)` and `compute(db, peers)` all work."""
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return min(len(positional), 2)


class Job:
    """One compute request and the settle-or-cancel race around it."""

    def __init__(self, id: int, sense: str, reason: str) -> None:
        self.id = id
        self.sense = sense
        self.reason = reason
        self.received = time.perf_counter()
        self.started: float | None = None
        self.state = "queued"  # queued | running | cancelled | settled
        self.task: asyncio.Future[Any] | None = None
        self.answered = False  # exactly one answer per compute, whatever path sends it
        self.waiting = False  # queued behind another compute of the same sense
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.state == "cancelled"

    def start(self) -> bool:
        with self._lock:
            if self.state != "queued":
                return False
            self.state = "running"
            self.started = time.perf_counter()
            return True

    def cancel(self) -> str | None:
        """Cancel if not settled yet; returns the state it was cancelled in ("queued" or "running"), else None."""
        with self._lock:
            if self.state in ("queued", "running"):
                was, self.state = self.state, "cancelled"
                return was
            return None

    def settle(self) -> bool:
        """True when the compute's own outcome wins and must be sent (checked before COMMIT)."""
        with self._lock:
            if self.state in ("running", "settled"):
                self.state = "settled"
                return True
            return False

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - (self.started or self.received)) * 1000, 3)


@dataclass(frozen=True)
class Outcome:
    kind: str  # signal | silent | error | abandoned
    payload: Any = None
    ts: int = 0
    workflow: str | None = None
    error: ErrorInfo | None = None


ABANDONED = Outcome("abandoned")


def run_sync(sense: LoadedSense, job: Job) -> Outcome:
    """A sync compute, start to finish, in the calling (worker pool) thread."""
    if not _begin(sense, job):
        return ABANDONED
    try:
        result = sense.compute(*sense.args())
        if inspect.isawaitable(result):
            _close_awaitable(result)
            raise TypeError("compute returned an awaitable: declare it `async def compute(db, peers)`")
    except BaseException as exc:  # user code may raise anything, SystemExit included
        return _fail(sense, job, exc)
    return _finish(sense, job, result)


async def run_async(sense: LoadedSense, job: Job) -> Outcome:
    """An `async def` compute as its own task, so a cancel can reach it."""
    if not _begin(sense, job):
        return ABANDONED
    job.task = asyncio.ensure_future(sense.compute(*sense.args()))
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


def _begin(sense: LoadedSense, job: Job) -> bool:
    if not job.start():
        return False
    conn = sense.db.conn
    conn.set_progress_handler(lambda: job.state == "cancelled", PROGRESS_STEPS)
    sense.peers.progress_handler = lambda: job.state == "cancelled"
    conn.execute("BEGIN IMMEDIATE")
    return True


def _finish(sense: LoadedSense, job: Job, result: Any) -> Outcome:
    payload, workflow = (result.payload, result.workflow) if isinstance(result, SenseResult) else (result, None)
    if payload is None:
        return _rolled_back(sense, job, Outcome("silent"))
    try:
        encoded = orjson.dumps(payload, option=_JSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        return _rolled_back(sense, job, Outcome("error", error=_not_json(sense, payload, exc)))
    wf = workflow if workflow is None or isinstance(workflow, str) else repr(workflow)
    size = len(encoded) + (len(orjson.dumps(wf)) if wf else 0)
    if size > MAX_PAYLOAD:  # its Signal line could not reach the kernel: refuse it before anything is stored
        return _rolled_back(sense, job, Outcome("error", error=_too_large(sense, size)))
    if not sense.db.conn.in_transaction:
        return _rolled_back(sense, job, Outcome("error", error=_txn_ended(sense)))
    ts = time.time_ns() // 1_000_000
    try:
        sense.db.record_signal(ts, encoded)
        if not job.settle():
            return _rolled_back(sense, job, ABANDONED)
        _quiet(sense)
        sense.db.conn.execute("COMMIT")
    except BaseException as exc:
        return _fail(sense, job, exc)
    # the Signal line embeds the JSON already stored: no decode and re-encode on the hop
    return Outcome("signal", payload=orjson.Fragment(encoded), ts=ts, workflow=wf)


def _fail(sense: LoadedSense, job: Job, exc: BaseException) -> Outcome:
    info = error_info(exc, sense.folder, sense.home)
    if isinstance(exc, sqlite3.OperationalError) and missing_object(info.message):
        info = dataclasses.replace(info, message=sql_hint(info.message, sense.name))
    return _rolled_back(sense, job, Outcome("error", error=info))


def _rolled_back(sense: LoadedSense, job: Job, outcome: Outcome) -> Outcome:
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
    return ErrorInfo(
        type="PayloadTooLarge",
        message=f"compute returned {size / 2**20:.1f} MiB of JSON; a signal carries at most "
                f"{MAX_PAYLOAD / 2**20:.1f} MiB, so nothing was stored. Keep large data in the sense's tables "
                "or in db.blobs.put(data), and return something small (e.g. its hash)",
        file=file, line=line,
    )


def _txn_ended(sense: LoadedSense) -> ErrorInfo:
    file, line = _defined_at(sense)
    return ErrorInfo(
        type="SenseError",
        message="compute ended Nerve's transaction itself (COMMIT or ROLLBACK through db.sqlite/db.conn); "
                "its writes may be committed but no signal was recorded. Return a value to commit, None to roll back",
        file=file, line=line,
    )
