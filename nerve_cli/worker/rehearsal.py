"""Dry runs (`nerve sense compute NAME --dry-run`): the real compute, in a real worker, on a copy of its
database, rolled back at the end, with what it would have written.

- `open_db`: an in-memory copy of the sense's database as it is (its file is
  read, never written: no migration run, no archive map or views rewritten),
  with pending migrations applied; a new sense's from its migrations. So even
  a commit the code makes itself through `db.conn` lands in the copy. A
  database over `COPY_MAX` is not copied: the compute then runs on the file
  in the one transaction that is rolled back (`copy` is false, and the answer
  says a commit of the code's own through `db.conn` would stay).
- `watch_writes`: temporary triggers (connection-local, in the temp schema:
  the file never sees them) on each of the sense's own tables record every
  insert, update and delete the compute makes inside its transaction;
  `writes` reads them back just before the ROLLBACK.
- `RehearsalBlobs`: `db.blobs.put` hashes and keeps the bytes in memory; `get`
  finds them there first. Nothing lands in data/blobs/.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.schema.apply import apply_migrations, migration_files
from nerve_cli.store.blobs import BlobStore
from nerve_cli.store.sensedb import SenseDB, damage_fix
from nerve_cli.store.sqlitefile import open_writer

ROWS_SHOWN = 20  # rows listed per table (all are counted)
COPY_MAX = 256 * 1024 * 1024  # a database larger than this is rehearsed on its file, in a rolled-back transaction
LOG_TABLE = "_nerve_rehearsal"  # in the temp schema (a trigger may not name the schema; temp is looked up first)
_ARGS = 60  # columns per json_object() call (SQLite allows 127 arguments)


def open_db(path: Path, migrations: Path, name: str, blobs: BlobStore) -> tuple[SenseDB, bool]:
    """(the database a dry run computes on, whether it is an in-memory copy)."""
    if path.exists():
        conn = open_writer(path, fix=damage_fix(path))
        if path.stat().st_size > COPY_MAX and not _pending(conn, migrations):
            return SenseDB(conn, name=name, path=path, blobs=blobs), False
        copy = _memory()
        conn.backup(copy)
        conn.close()
    else:
        copy = _memory()
    apply_migrations(copy, migrations)
    return SenseDB(copy, name=name, path=path, blobs=blobs), True


def _memory() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)


def _pending(conn: sqlite3.Connection, migrations: Path) -> bool:
    try:
        applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    except sqlite3.OperationalError:
        return True  # not a migrated database yet
    return any(f.name not in applied for f in migration_files(migrations))


def _tables(conn: sqlite3.Connection) -> list[str]:
    """The sense's own tables (Nerve's start with `_`)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                        "AND substr(name, 1, 1) != '_' ORDER BY name")
    return [r[0] for r in rows]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _row_json(conn: sqlite3.Connection, table: str, ref: str) -> str:
    """SQL building a JSON object of row `ref` (NEW or OLD); a blob shows as {"bytes": n}."""
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]
    parts = []
    for start in range(0, len(columns), _ARGS):
        pairs = ", ".join(f"'{c.replace(chr(39), chr(39) * 2)}', CASE typeof({ref}.{_q(c)}) WHEN 'blob' THEN "
                          f"json_object('bytes', length({ref}.{_q(c)})) ELSE {ref}.{_q(c)} END"
                          for c in columns[start:start + _ARGS])
        parts.append(f"json_object({pairs})")
    out = parts[0] if parts else "json_object()"
    for part in parts[1:]:
        out = f"json_patch({out}, {part})"
    return out


def watch_writes(conn: sqlite3.Connection) -> None:
    """Inside the compute's transaction: record every row change of the sense's tables (in the temp schema)."""
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {LOG_TABLE} (seq INTEGER PRIMARY KEY, tbl TEXT, op TEXT, row TEXT)")
    for i, table in enumerate(_tables(conn)):
        for op, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
            conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS _nerve_rehearsal_{op.lower()}_{i} AFTER {op} ON "
                         f"main.{_q(table)} BEGIN INSERT INTO {LOG_TABLE} (tbl, op, row) VALUES "
                         f"('{table.replace(chr(39), chr(39) * 2)}', '{op.lower()}', {_row_json(conn, table, ref)}); "
                         "END")


def writes(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """What the compute wrote, per table: counts by kind and the first rows, in order."""
    out: dict[str, dict[str, Any]] = {}
    try:
        rows = conn.execute(f"SELECT tbl, op, row FROM {LOG_TABLE} ORDER BY seq").fetchall()
    except sqlite3.OperationalError:
        return out
    for table, op, row in rows:
        entry = out.setdefault(table, {"inserted": 0, "updated": 0, "deleted": 0, "rows": []})
        entry[{"insert": "inserted", "update": "updated", "delete": "deleted"}[op]] += 1
        if len(entry["rows"]) < ROWS_SHOWN:
            entry["rows"].append({"op": op, "row": orjson.loads(row)})
    return out


class RehearsalBlobs(BlobStore):
    """A blob store that writes nothing: what a dry run puts is kept in memory and reported."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.held: dict[str, int] = {}  # sha256 → bytes
        self._data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(bytes(data)).hexdigest()
        self._data[sha] = bytes(data)
        self.held[sha] = len(data)
        return sha

    def get(self, sha: str) -> bytes:
        return self._data[sha] if sha in self._data else super().get(sha)

    def exists(self, sha: str) -> bool:
        return sha in self._data or super().exists(sha)
