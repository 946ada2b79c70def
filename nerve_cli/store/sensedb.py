"""The database handle a sense's `compute(db, peers)` receives, and its read-only peers.

One `sqlite3` connection per sense database, in autocommit mode at the driver
level (`isolation_level=None`): the sense worker owns the transaction
(`BEGIN IMMEDIATE` … `COMMIT`/`ROLLBACK`) around each compute, so nothing in
here commits on its own. WAL + `synchronous=NORMAL` keeps one-row
transactions fast; `check_same_thread=False` because sync computes run in a
worker thread.

Peers are opened read-only at the SQLite level (`mode=ro` + `query_only`), so
a write through a peer handle raises whatever the code path.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import orjson

from nerve_cli.errors import SenseError
from nerve_cli.names import binding_key
from nerve_cli.schema import views
from nerve_cli.schema.declare import from_row, spec_of, to_row
from nerve_cli.store.bindings import read_binding
from nerve_cli.store.blobs import BlobStore
from nerve_cli.store.sqlitefile import open_reader, open_writer

if TYPE_CHECKING:
    import sqlite_utils

    from nerve_cli.schema.declare import TableSpec

# Statements that would end or nest the transaction Nerve holds around a compute.
_TXN_RE = re.compile(r"^\s*(BEGIN|COMMIT|END|ROLLBACK(?!\s+TO\b))\b", re.IGNORECASE)


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open a sense database: read-write (created if missing, DamagedDatabase if unreadable) or strictly read-only."""
    path = Path(path)
    if not readonly:
        return open_writer(path, fix=damage_fix(path))
    return open_reader(path, fix=damage_fix(path), isolation_level=None, check_same_thread=False)


def damage_fix(path: Path) -> str:
    """What to do about a damaged sense database."""
    return (f"restore it from a backup, or delete it (`rm {path}`) to start this sense from an empty database "
            "(its tables are rebuilt from the migrations; its rows are lost)")


class SenseDB:
    """A sense's database as sense code sees it: typed inserts and reads, raw SQL, signals, blobs."""

    def __init__(self, conn: sqlite3.Connection, *, name: str, path: Path | None = None,
                 blobs: BlobStore | None = None, readonly: bool = False) -> None:
        self.conn = conn
        self.name = name
        self.path = path
        self.readonly = readonly
        self._blobs = blobs
        self._sqlite: sqlite_utils.Database | None = None
        self._insert_sql: dict[tuple[str, tuple[str, ...], bool], str] = {}

    @classmethod
    def open(cls, path: Path, *, name: str, blobs: BlobStore | None = None, readonly: bool = False) -> SenseDB:
        return cls(connect(path, readonly=readonly), name=name, path=Path(path), blobs=blobs, readonly=readonly)

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<SenseDB {self.name} {mode} {self.path}>"

    # --- handles ------------------------------------------------------------

    @property
    def sqlite(self) -> sqlite_utils.Database:
        """The same connection as a `sqlite_utils.Database` (imported on first use: it is slow to import)."""
        if self._sqlite is None:
            import sqlite_utils

            self._sqlite = sqlite_utils.Database(self.conn, execute_plugins=False)
        return self._sqlite

    @property
    def blobs(self) -> BlobStore:
        if self._blobs is None:
            raise SenseError(f"sense `{self.name}`: no blob store is attached to this database handle")
        return self._blobs

    # --- typed rows ---------------------------------------------------------

    def insert(self, obj: Any) -> int:
        """Insert one `@table` instance; returns the new rowid."""
        spec = spec_of(obj)
        row = to_row(obj)
        return self._execute(self._typed_sql(spec, tuple(row), upsert=False), tuple(row.values())).lastrowid or 0

    def insert_all(self, objs: Iterable[Any]) -> int:
        """Insert many `@table` instances (any mix of tables, in order); returns how many."""
        count = 0
        batch: list[tuple[Any, ...]] = []
        batch_sql: str | None = None
        for obj in objs:
            row = to_row(obj)
            sql = self._typed_sql(spec_of(obj), tuple(row), upsert=False)
            if sql != batch_sql and batch:
                self.conn.executemany(batch_sql, batch)  # type: ignore[arg-type]
                batch = []
            batch_sql = sql
            batch.append(tuple(row.values()))
            count += 1
        if batch:
            self.conn.executemany(batch_sql, batch)  # type: ignore[arg-type]
        return count

    def upsert(self, obj: Any) -> None:
        """Insert, or update the row with the same primary key."""
        spec = spec_of(obj)
        if not spec.pk:
            raise SenseError(f"upsert into `{spec.name}` needs a primary key: declare @table(pk=...) in schema.py")
        row = to_row(obj)
        self._execute(self._typed_sql(spec, tuple(row), upsert=True), tuple(row.values()))

    def rows(self, cls: type, where: str | None = None, params: Sequence[Any] | dict[str, Any] = (),
             order_by: str | None = None, limit: int | None = None) -> list[Any]:
        """Read rows of `cls`'s table as instances of `cls`."""
        spec = spec_of(cls)
        sql = f"SELECT * FROM {_quote(spec.name)}"
        if where:
            sql += f" WHERE {where}"
        if order_by:
            sql += f" ORDER BY {order_by}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [from_row(cls, row) for row in self.query(sql, params)]

    # --- raw SQL ------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        cursor = self._execute(sql, params)
        if cursor.description is None:
            return []
        keys = [d[0] for d in cursor.description]
        return [dict(zip(keys, row)) for row in cursor.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        return self._execute(sql, params)

    def _execute(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> sqlite3.Cursor:
        if _TXN_RE.match(sql):
            raise SenseError(
                f"sense `{self.name}`: {sql.split()[0].upper()} is not allowed in a compute: Nerve runs each "
                "compute in one transaction; return a value to commit, return None or raise to roll back"
            )
        return self.conn.execute(sql, params)

    # --- signals ------------------------------------------------------------

    def signals_since(self, ts_ms: int, limit: int | None = None) -> list[dict[str, Any]]:
        """This sense's signals with `ts > ts_ms`, oldest first: `{"id", "ts", "payload"}`."""
        sql = "SELECT id, ts, payload FROM _signals WHERE ts > ? ORDER BY ts, id"
        args: tuple[Any, ...] = (int(ts_ms),)
        if limit is not None:
            sql += " LIMIT ?"
            args += (int(limit),)
        return [_signal(r) for r in self.conn.execute(sql, args).fetchall()]

    def last_signal(self) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT id, ts, payload FROM _signals ORDER BY id DESC LIMIT 1").fetchone()
        return _signal(row) if row else None

    def record_signal(self, ts_ms: int, payload_json: bytes | str, schema_version: str | None = None,
                      digest: str | None = None) -> int:
        """Append a `_signals` row inside the current transaction (the runtime's job, not sense code's); its id.
        `schema_version` and `digest` (the payload's content hash): what the sense's settings ask its signals
        to carry, as events, for its listeners."""
        if isinstance(payload_json, bytes):
            payload_json = payload_json.decode()
        if schema_version is None and digest is None:  # a database from before these columns works as it did
            return self.conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (ts_ms, payload_json)).lastrowid or 0
        return self.conn.execute("INSERT INTO _signals (ts, payload, schema_version, hash) VALUES (?, ?, ?, ?)",
                                 (ts_ms, payload_json, schema_version, digest)).lastrowid or 0

    def close(self) -> None:
        self.conn.close()

    # --- helpers ------------------------------------------------------------

    def _typed_sql(self, spec: TableSpec, columns: tuple[str, ...], *, upsert: bool) -> str:
        key = (spec.name, columns, upsert)
        sql = self._insert_sql.get(key)
        if sql is None:
            names = ", ".join(_quote(c) for c in columns)
            marks = ", ".join("?" for _ in columns)
            sql = f"INSERT INTO {_quote(spec.name)} ({names}) VALUES ({marks})"
            if upsert:
                rest = [c for c in columns if c not in spec.pk]
                conflict = ", ".join(_quote(c) for c in spec.pk)
                action = ("DO UPDATE SET " + ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in rest)
                          if rest else "DO NOTHING")
                sql += f" ON CONFLICT ({conflict}) {action}"
            self._insert_sql[key] = sql
        return sql


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _signal(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"id": row[0], "ts": row[1], "payload": orjson.loads(row[2])}


def write_archive_map(conn: sqlite3.Connection, specs: Iterable[TableSpec]) -> None:
    """Rewrite `_nerve_archive` from the schema's `time=` markers (the archiver never imports user code),
    and the readable views that follow from it."""
    rows = [(s.name, s.time) for s in specs if s.time]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS _nerve_archive "
                     "(table_name TEXT PRIMARY KEY, time_column TEXT NOT NULL)")
        conn.execute("DELETE FROM _nerve_archive")
        conn.executemany("INSERT INTO _nerve_archive (table_name, time_column) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    views.sync(conn, views.sense_views(conn))  # a readable `<table>_view` for each table with a time column


class Peers(Mapping[str, SenseDB]):
    """The read-only databases a sense may read: exactly those listed under `senses.<name>.peers`.

    Handles open on first use, so a peer that had not run when the worker
    started becomes readable as soon as its database exists.

    A lazy peer (one read brings up to date) is brought up to date by the first
    `peers[name]` of each compute, through `refresher` (the worker asks the
    kernel, and waits); one with parameters by `value(name, **params)`, which
    answers that projection's value.
    """

    def __init__(self, sense: str, allowed: Iterable[str], db_path: Callable[[str], Path],
                 blobs: BlobStore | None = None, lazy: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.sense = sense
        self.allowed = tuple(allowed)
        self._db_path = db_path
        self._blobs = blobs
        self._open: dict[str, SenseDB] = {}
        self.lazy = dict(lazy or {})  # lazy peer → the parameters a read of it binds
        # Set by the worker: brings a lazy peer up to date for some parameter values, or raises SenseError.
        self.refresher: Callable[[str, dict[str, Any] | None], None] | None = None
        self._fresh: set[str | None] = set()  # (peer, values) brought up to date in this compute
        # Set by the worker per compute: returns True to interrupt a peer query (soft timeout).
        self.progress_handler: Callable[[], bool] | None = None

    def begin(self) -> None:
        """A compute starts: lazy peers are brought up to date again at their first read."""
        self._fresh.clear()

    def __getitem__(self, name: str) -> SenseDB:
        if name in self.lazy and not self.lazy[name]:
            self._refresh(name, None)
        return self._handle(name)

    def value(self, name: str, **params: Any) -> Any:
        """A peer's current value: for a lazy peer with parameters, that projection's (brought up to date
        first), else its newest signal's payload (a lazy peer brought up to date first). None before any."""
        if name in self.lazy:
            self._refresh(name, params or None)
        elif params:
            raise SenseError(f"sense `{self.sense}` reads peer `{name}` with parameters, but `{name}` takes none")
        handle = self._handle(name)
        key = binding_key(params)
        if key is not None:
            return read_binding(handle.conn, key)[1]
        last = handle.last_signal()
        return last["payload"] if last else None

    def _refresh(self, name: str, params: dict[str, Any] | None) -> None:
        if name not in self.allowed:
            self._handle(name)  # the usual refusal, naming the `peers:` key
        key = f"{name}\0{binding_key(params) or ''}"
        if key in self._fresh:
            return
        wanted = self.lazy[name]
        if sorted(params or {}) != sorted(wanted):
            usage = ", ".join(f"{p}=..." for p in wanted) or "no parameters"
            raise SenseError(f"sense `{self.sense}` reads lazy peer `{name}`, which is read with {usage}: "
                             f"peers.value({name!r}{''.join(f', {p}=...' for p in wanted)})")
        if self.refresher is None:
            raise SenseError(f"sense `{self.sense}` reads lazy peer `{name}`, but nothing here can bring it up "
                             "to date")
        self.refresher(name, params)
        self._fresh.add(key)

    def _handle(self, name: str) -> SenseDB:
        handle = self._open.get(name)
        if handle is not None:
            return handle
        if name not in self.allowed:
            listed = ", ".join(self.allowed) or "none"
            raise SenseError(
                f"sense `{self.sense}` reads peer `{name}`, which is not listed under "
                f"senses.{self.sense}.peers in nerve.yaml (listed: {listed}); add it there"
            )
        path = Path(self._db_path(name))
        if not path.is_file():
            raise SenseError(
                f"sense `{self.sense}` reads peer `{name}`, which has not run yet: {path} does not exist"
            )
        handle = SenseDB.open(path, name=name, blobs=self._blobs, readonly=True)
        handle.conn.set_progress_handler(self._interrupted, 1000)
        self._open[name] = handle
        return handle

    def _interrupted(self) -> bool:
        check = self.progress_handler
        return bool(check and check())

    def __contains__(self, name: object) -> bool:
        return name in self.allowed

    def __iter__(self) -> Iterator[str]:
        return iter(self.allowed)

    def __len__(self) -> int:
        return len(self.allowed)

    def __repr__(self) -> str:
        return f"<Peers of {self.sense}: {', '.join(self.allowed) or 'none'}>"

    def close(self) -> None:
        for handle in self._open.values():
            handle.close()
        self._open.clear()


def open_peer(path: Path, *, name: str | None = None, blobs: BlobStore | None = None) -> SenseDB:
    """A read-only handle on a sense database (used for peers and by read-only CLI commands)."""
    path = Path(path)
    return SenseDB.open(path, name=name or path.stem, blobs=blobs, readonly=True)
