"""data/logs.db: the kernel's append-only log, workflow_runs and meta.

`LogStore` is the single writer. It buffers operations and writes them in
order, one transaction per `flush()`, so a batch of log rows, the
`workflow_runs` upserts they imply and the meta keys they advance commit
together or not at all. The read helpers below open their own read-only
connections and can run while the engine writes (WAL).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from nerve_cli.clock import now_ms
from nerve_cli.contract.times import iso
from nerve_cli.schema import views
from nerve_cli.store.sqlitefile import damaged, is_damage, is_read_only, open_reader, open_writer, read_only
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.vocab.states import LIVE, ThreadStatus
from nerve_cli.wire.limits import MAX_LINE

# The most a row's payload may take: as much as the largest signal or event it may carry (an emit row
# holds the event's payload), never more, whatever the text it was made from.
MAX_ROW = MAX_LINE

SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, type TEXT NOT NULL,
  ref_id TEXT, payload TEXT, ts INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS idx_logs_source_type ON logs(source, type);
CREATE INDEX IF NOT EXISTS idx_logs_ts ON logs(ts);
CREATE INDEX IF NOT EXISTS idx_logs_ref_id ON logs(ref_id);
CREATE TABLE IF NOT EXISTS workflow_runs (run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, status TEXT NOT NULL, ts INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS idx_workflow_runs_status ON workflow_runs(status);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS thread_transitions (id INTEGER PRIMARY KEY AUTOINCREMENT, log_id INTEGER NOT NULL, depth INTEGER, path TEXT);
"""  # noqa: E501 (the SQL as SQLite keeps it, one statement a line)

# workflow event types that change a thread's status in workflow_runs: the ThreadStatus values
STATUSES = frozenset(ThreadStatus)
# a live thread's rows are never archived: a queued, running or waiting thread resumes from them
LIVE_STATUSES = tuple(sorted(LIVE))
LAST_COMPLETE = "last_complete:"
# meta key present once every sense's last completion is in a `last_complete:` key: the logs are
# never scanned for them again (a logs.db made before the keys is scanned once, see backfill_anchors)
ANCHORED = "completion_anchors"

# watermarks of what is logged, raised with the rows they cover (see kernel/core/ledger.py)
SIGNAL_MARK = "logged_signal:"  # + sense: the highest `_signals.id` whose run_complete row is in the log
EVENT_MARK = "logged_event"  # the highest events.id whose emit row is


def signal_mark(sense: str, signal_id: int) -> tuple[str, int]:
    """The `mark` that goes with a signal's run_complete row (LogStore.write): the next engine skips it."""
    return SIGNAL_MARK + sense, signal_id


def event_mark(event_id: int) -> tuple[str, int]:
    return EVENT_MARK, event_id


_INSERT_LOG = "INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, ?, ?, ?, ?)"
_UPSERT_RUN = (
    "INSERT INTO workflow_runs (run_id, workflow, status, ts) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(run_id) DO UPDATE SET workflow = excluded.workflow, status = excluded.status, ts = excluded.ts"
)
# a thread's status change as nerve-threads will signal it: written right after its log row (whose id it takes),
# in the same transaction, by `write` only. nerve-threads reads these, never the log: a row put into `logs` by
# hand is no transition.
_INSERT_TRANSITION = "INSERT INTO thread_transitions (log_id, depth, path) VALUES (last_insert_rowid(), ?, ?)"
_SET_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"


def dumps(payload: Any) -> str | None:
    """Payload → JSON text (orjson; non-JSON values fall back to str), at most `MAX_ROW` bytes (see `_fit`)."""
    if payload is None:
        return None
    text = orjson.dumps(payload, default=str, option=orjson.OPT_NON_STR_KEYS)
    return (text if len(text) <= MAX_ROW else _fit(payload, len(text))).decode()


def _fit(payload: Any, size: int) -> bytes:
    """A row too large to keep whole (a payload is checked where it is made, so only text Nerve did not bound
    gets here, e.g. problems quoting a hostile file): its strings and lists are cut, shorter each try, until
    it fits, and it says how large it was (`truncated_from_bytes`). The row stays valid JSON."""
    cap = MAX_ROW // 4
    while True:
        cut = _cut(payload, cap)
        if isinstance(cut, dict):
            cut["truncated_from_bytes"] = size
        text = orjson.dumps(cut, default=str, option=orjson.OPT_NON_STR_KEYS)
        if len(text) <= MAX_ROW or cap <= 16:
            return text
        cap //= 4


def _cut(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= cap else value[:cap] + f"… ({len(value) - cap:,} more characters)"
    if isinstance(value, dict):
        return {k: _cut(v, cap) for k, v in list(value.items())[:cap]}
    if isinstance(value, (list, tuple)):
        kept = [_cut(v, cap) for v in value[:cap]]
        return kept + [f"… ({len(value) - cap:,} more items)"] if len(value) > cap else kept
    return value


def iso_ms(ts: int) -> str:
    """Unix ms → ISO-8601 UTC with milliseconds, e.g. 2026-09-01T12:00:00.123Z (hot in the archiver)."""
    return iso(ts)


def open_db(path: Path) -> sqlite3.Connection:
    """A writer connection in autocommit mode (we issue BEGIN/COMMIT ourselves); DamagedDatabase if unreadable."""
    return open_writer(path, fix=damage_fix(path))


def damage_fix(path: Path) -> str:
    """What to do about a damaged logs.db."""
    return (f"restore it from a backup, or move it aside (`mv {path} {path}.damaged`) to start a new, "
            "empty log (the history, threads and interval anchors start over)")


def _runs(ops: list[tuple[str, tuple]]) -> Iterator[tuple[str, list[tuple]]]:
    """Group consecutive ops with the same statement, keeping their order."""
    run: list[tuple] = []
    current = None
    for sql, params in ops:
        if sql != current and run:
            yield current, run  # type: ignore[misc]
            run = []
        current = sql
        run.append(params)
    if run:
        yield current, run  # type: ignore[misc]


class LogStore:
    """The kernel's single writer of data/logs.db. Writes are buffered and flushed in order."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn = open_db(self.path)  # also makes data/ the owner's only (0700)
        try:
            self._conn.executescript(SCHEMA)
            views.sync(self._conn, views.LOGS_VIEWS)
        except sqlite3.DatabaseError as exc:  # a header that reads, pages that do not
            self._conn.close()
            if is_damage(exc):
                raise damaged(self.path, str(exc), damage_fix(self.path)) from None
            raise
        self._lock = threading.RLock()  # the buffer
        self._write_lock = threading.RLock()  # the connection: one transaction at a time (taken before _lock)
        # each op is (sql, params); kept in call order and written in that order
        self._ops: list[tuple[str, tuple]] = []
        self._marks: dict[str, int] = {}  # meta key → highest id whose log row is in the buffer (see mark)
        self.tap: Callable[[LogRow], None] | None = None  # sees every row written (the engine's traces)
        # sense → ts of its last run_complete: read from meta once, then kept here as rows are appended,
        # so a hot reload asks no database (and never waits for a flush) to anchor a sense's interval
        self._completions: dict[str, int] = {
            sense: int(value) for sense, value in _prefixed(self._conn, LAST_COMPLETE)}
        self._dirty: set[str] = set()  # senses whose last completion is not in meta yet
        self._held: list[tuple] | None = None  # rows set aside by `hold`, written by `replay`
        self._held_by = 0  # the thread whose rows are held
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'run_counter'").fetchone()
        self._run_counter = int(row[0]) if row else 0
        self.anchored = self._conn.execute("SELECT 1 FROM meta WHERE key = ?", (ANCHORED,)).fetchone() is not None
        if not self.anchored and self._conn.execute("SELECT 1 FROM logs LIMIT 1").fetchone() is None:
            self._conn.execute(_SET_META, (ANCHORED, "1"))  # a new log: every completion will have its key
            self.anchored = True

    # -- writes (buffered) -------------------------------------------------
    def write(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None,
              cause: dict[str, Any] | None = None) -> None:
        """Buffer one row built by its constructor (`vocab.logrows`): how Nerve writes its log.

        A thread row whose kind is a status also sets the thread's status in workflow_runs and records the
        transition nerve-threads signals (with `cause`, its causal depth and path), in the same transaction;
        `mark=(key, id)` raises that watermark with the row (see `mark`).
        """
        held = self._held
        if held is not None and self._held_by == threading.get_ident():
            held.append((row, ts, mark, cause))
            return
        if self.tap is not None:
            self.tap(row)
        kind = row.kind
        status = kind.status
        if status is None:
            self.append(kind.source_text, kind.type, row.ref, row.payload, ts, mark)
            return
        ts = now_ms() if ts is None else ts
        workflow = (row.payload or {}).get("workflow", "")
        depth, path = (cause.get("depth"), cause.get("path")) if cause else (None, None)
        with self._lock:
            self.append(kind.source_text, kind.type, row.ref, row.payload, ts, mark)
            self._ops.append((_INSERT_TRANSITION, (depth, None if path is None else orjson.dumps(path).decode())))
            self._ops.append((_UPSERT_RUN, (row.ref, workflow, status.value, ts)))

    def hold(self) -> list[tuple] | None:
        """Set aside the rows this thread writes from now until `unhold`, for `replay` to write after rows
        written in between: the loop hands a listener its start before it writes the finished compute's
        rows, and the log still reads run_complete before run_start. None when a hold is already on (its
        rows stay in that one)."""
        if self._held is not None:
            return None
        self._held, self._held_by = [], threading.get_ident()
        return self._held

    def unhold(self, held: list[tuple] | None) -> None:
        if held is not None and self._held is held:
            self._held = None

    def replay(self, held: list[tuple] | None) -> None:
        """Write the rows `hold` set aside, in the order they came, each stamped now (so ts follows id)."""
        self.unhold(held)
        for row, ts, mark, cause in held or ():
            self.write(row, ts, mark, cause)
        if held:
            held.clear()

    def append(
        self,
        source: str,
        type: str,
        ref_id: str | None = None,
        payload: dict | None = None,
        ts: int | None = None,
        mark: tuple[str, int] | None = None,
    ) -> None:
        """Buffer one row as given: rows from elsewhere (an older version's, a test's). Nerve's own rows go
        through `write`, so that each kind is built in one place."""
        ts = now_ms() if ts is None else ts
        with self._lock:
            self._ops.append((_INSERT_LOG, (source, type, ref_id, dumps(payload), ts)))
            if mark is not None and mark[1] > self._marks.get(mark[0], -1):
                self._marks[mark[0]] = mark[1]
            if type == "run_complete" and ref_id:
                # kept in meta so a restart finds interval anchors without scanning logs; written once
                # per sense per flush (in the same transaction as its rows), however often it ran
                self._completions[ref_id] = max(ts, self._completions.get(ref_id, 0))
                self._dirty.add(ref_id)

    def workflow_event(
        self, run_id: str, workflow: str, type: str, payload: dict | None = None, ts: int | None = None
    ) -> None:
        """A thread row as given (like `append`), setting workflow_runs when `type` is a status."""
        ts = now_ms() if ts is None else ts
        with self._lock:
            self.append("workflow", type, run_id, payload, ts)
            if type in STATUSES:
                self._ops.append((_UPSERT_RUN, (run_id, workflow, type, ts)))

    def allocate_run_id(self) -> str:
        """Next `run-N`; the counter is persisted with the next flush (the caller's `queued` row)."""
        with self._lock:
            self._run_counter += 1
            self._ops.append((_SET_META, ("run_counter", str(self._run_counter))))
            return f"run-{self._run_counter}"

    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._ops.append((_SET_META, (key, str(value))))

    def mark(self, key: str, value: int) -> None:
        """Raise meta `key` to `value` in the same transaction as the rows buffered so far.

        A watermark of what is logged (e.g. the last signal id of a sense whose
        run_complete row is written): one meta write per flush, not per row.
        """
        with self._lock:
            if value > self._marks.get(key, -1):
                self._marks[key] = value

    def pending(self) -> int:
        return len(self._ops) + len(self._dirty) + len(self._marks)

    def flush(self) -> int:
        """Write every buffered op in one transaction, in order. Returns the number of log rows.

        The buffer is swapped out first, so `append()` never waits for a COMMIT
        (the engine flushes from a thread while its loop keeps appending). On a
        sqlite error the transaction is rolled back, the rows go back to the
        front of the buffer (the next flush retries them, in the same order)
        and the error is re-raised.
        """
        with self._write_lock:
            with self._lock:
                ops, self._ops = self._ops, []
                dirty, self._dirty = self._dirty, set()
                anchors = [(LAST_COMPLETE + sense, str(self._completions[sense])) for sense in dirty]
                marks, self._marks = self._marks, {}
            if not ops and not anchors and not marks:
                return 0
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                for sql, rows in _runs(ops):  # consecutive ops of one statement go in one executemany
                    self._conn.executemany(sql, rows)
                if anchors or marks:
                    self._conn.executemany(_SET_META, anchors + [(k, str(v)) for k, v in marks.items()])
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                with self._lock:
                    self._ops = ops + self._ops
                    self._dirty |= dirty
                    for key, value in marks.items():
                        self._marks[key] = max(value, self._marks.get(key, -1))
                if is_read_only(exc):
                    raise read_only(self.path) from None
                raise
            return sum(1 for sql, _ in ops if sql == _INSERT_LOG)

    # -- reads ---------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._write_lock:
            self.flush()
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return row[0] if row else None

    def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """meta keys starting with `prefix` (prefix removed) → value."""
        with self._write_lock:
            self.flush()
            return dict(_prefixed(self._conn, prefix))

    def last_completions(self) -> dict[str, int]:
        """sense → ts (ms) of its last `reflex/run_complete`, from memory (meta, plus what was appended since).

        On a logs.db from before the meta keys this first scans the logs once (`backfill_anchors`);
        the engine does that off its event loop before it asks.
        """
        if not self.anchored:
            self.backfill_anchors()
        with self._lock:
            return dict(self._completions)

    def backfill_anchors(self) -> None:
        """One-time: find each sense's last completion in the logs themselves and keep it in meta.

        A GROUP BY over every run_complete row: it grows with the log, which is why it runs once
        (the ANCHORED key, committed with the anchors, says it has) and not at every start or reload.
        """
        with self._write_lock:
            if self.anchored:
                return
            self.flush()
            rows = self._conn.execute(
                "SELECT ref_id, MAX(ts) FROM logs WHERE source = 'reflex' AND type = 'run_complete' "
                "AND ref_id IS NOT NULL GROUP BY ref_id"
            ).fetchall()
            with self._lock:
                for sense, ts in rows:
                    if ts > self._completions.get(sense, 0):
                        self._completions[sense] = ts
                        self._dirty.add(sense)
                self._ops.append((_SET_META, (ANCHORED, "1")))
            self.flush()
            self.anchored = True

    def close(self) -> None:
        with self._write_lock:
            try:
                self.flush()
            finally:
                self._conn.close()

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _prefixed(conn: sqlite3.Connection, prefix: str) -> list[tuple[str, str]]:
    """(key without `prefix`, value) of the meta keys starting with `prefix`: a range of the key index."""
    return conn.execute("SELECT substr(key, ?), value FROM meta WHERE key >= ? AND key < ?",
                        (len(prefix) + 1, prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))).fetchall()


def read_meta_with_prefix(path: Path, prefix: str) -> dict[str, str]:
    """A reader's `LogStore.meta_with_prefix`: {} before logs.db (or its meta table) exists; a damaged file
    raises DamagedDatabase naming it."""
    if not path.exists():
        return {}
    conn = open_readonly(path)
    try:
        return dict(_prefixed(conn, prefix))
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def last_completions(path: Path) -> dict[str, int]:
    """sense → ts (ms) of its last completion, read from meta (the engine's anchors) by a reader."""
    conn = open_readonly(path)
    try:
        return {sense: int(value) for sense, value in _prefixed(conn, LAST_COMPLETE)}
    finally:
        conn.close()


# -- read side: separate read-only connections -------------------------------

def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that sees the writer's commits (WAL), also on a read-only filesystem."""
    return open_reader(path, fix=damage_fix(path))


def parse_payload(payload: str | None) -> Any:
    """Stored JSON text → object; text that is not JSON (written by hand) is kept as the string."""
    if payload is None:
        return None
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload


def log_row(row: tuple) -> dict:
    """(id, source, type, ref_id, payload, ts) → the row dict used by the CLI, --json and the archive."""
    id_, source, type_, ref_id, payload, ts = row
    return {
        "id": id_,
        "source": source,
        "type": type_,
        "ref_id": ref_id,
        "payload": parse_payload(payload),
        "ts": ts,
        "time": iso_ms(ts),
    }


def _equal(pairs: tuple[tuple[str, Any], ...]) -> tuple[list[str], list]:
    """`column = ?` clauses for the filters that were given."""
    given = [(column, value) for column, value in pairs if value is not None]
    return [f"{column} = ?" for column, _ in given], [value for _, value in given]


def _joined(clauses: list[str]) -> str:
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def _where(source, type, ref, since_ms, after_id, until_ms=None) -> tuple[str, list]:
    clauses, params = _equal((("source", source), ("type", type), ("ref_id", ref)))
    if since_ms is not None:
        clauses.append("ts >= ?")
        params.append(since_ms)
    if until_ms is not None:
        clauses.append("ts < ?")
        params.append(until_ms)
    if after_id is not None:
        clauses.append("id > ?")
        params.append(after_id)
    return _joined(clauses), params


def query_logs(
    path: Path,
    *,
    source: str | None = None,
    type: str | None = None,
    ref: str | None = None,
    since_ms: int | None = None,
    after_id: int | None = None,
    limit: int | None = None,
    until_ms: int | None = None,
) -> list[dict]:
    """Log rows matching every given filter, newest last; `limit` keeps the newest. No db → []."""
    if not Path(path).exists():
        return []
    where, params = _where(source, type, ref, since_ms, after_id, until_ms)
    sql = f"SELECT id, source, type, ref_id, payload, ts FROM logs{where} ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    conn = open_readonly(path)
    try:
        rows = [log_row(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()
    rows.reverse()
    return rows


def iter_logs(conn: sqlite3.Connection, sql_where: str = "", params: tuple = ()) -> Iterator[dict]:
    """Stream log rows (cursor iteration) in id order."""
    cur = conn.execute(f"SELECT id, source, type, ref_id, payload, ts FROM logs{sql_where} ORDER BY id", params)
    for r in cur:
        yield log_row(r)


def workflow_runs(path: Path, status: str | None = None, workflow: str | None = None) -> list[dict]:
    """Rows of workflow_runs (run_id, workflow, status, ts, time), in run order. No db → []."""
    if not Path(path).exists():
        return []
    clauses, params = _equal((("status", status), ("workflow", workflow)))
    where = _joined(clauses)
    sql = (
        f"SELECT run_id, workflow, status, ts FROM workflow_runs{where} "
        "ORDER BY CAST(substr(run_id, 5) AS INTEGER), run_id"
    )
    conn = open_readonly(path)
    try:
        return [
            {"run_id": r, "workflow": w, "status": s, "ts": t, "time": iso_ms(t)}
            for r, w, s, t in conn.execute(sql, params)
        ]
    finally:
        conn.close()
