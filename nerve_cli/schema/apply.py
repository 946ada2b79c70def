"""Apply a sense's pending `migrations/NNNN_*.sql` files at run time, each in its own transaction.

Every applied file is recorded in `_migrations` (name, sha256, applied_at ms);
an applied file that changed since is refused, because the database would no
longer be what the migrations describe.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.clock import now_ms
from nerve_cli.errors import MigrationError
from nerve_cli.schema import views

FILE_RE = re.compile(r"^(\d{4})_[A-Za-z0-9_.-]+\.sql\Z")

# Who this database is: a random id written once, when the file is made. A listener keeps it beside its cursor
# on each source, so a source database deleted and rebuilt (its ids starting again at 1) is told from the one
# the cursor was counting in (store.events, worker.events).
IDENTITY_SQL = (
    "CREATE TABLE IF NOT EXISTS _nerve_identity (id TEXT NOT NULL)",
    "INSERT INTO _nerve_identity (id) SELECT lower(hex(randomblob(16))) WHERE NOT EXISTS (SELECT 1 FROM _nerve_identity)",
)
CURSOR_IDENTITY = "ALTER TABLE _nerve_cursors ADD COLUMN identity TEXT"  # for cursors made before identities
# what a signal carries as an event when its sense's settings ask (senses.NAME.signal_version / signal_hash)
SIGNAL_COLUMNS = {"schema_version": "ALTER TABLE _signals ADD COLUMN schema_version TEXT",
                  "hash": "ALTER TABLE _signals ADD COLUMN hash TEXT"}

ENGINE_TABLES_SQL = (
    "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, payload TEXT NOT NULL, "
    "schema_version TEXT, hash TEXT)",
    "CREATE INDEX IF NOT EXISTS idx__signals_ts ON _signals(ts)",
    "CREATE TABLE IF NOT EXISTS _nerve_archive (table_name TEXT PRIMARY KEY, time_column TEXT NOT NULL)",
    # what this sense consumed of each `on:` source (store.events); moved only inside its computes
    "CREATE TABLE IF NOT EXISTS _nerve_cursors (source TEXT PRIMARY KEY, last_id INTEGER NOT NULL, ts INTEGER NOT NULL, "
    "identity TEXT)",  # identity: the source database's, when last_id was counted
    *IDENTITY_SQL,
)


@dataclass(frozen=True)
class MigrationFile:
    number: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def migration_files(migrations_dir: Path) -> list[MigrationFile]:
    """The `NNNN_*.sql` files in numeric order; a stray .sql file or a duplicate number is an error."""
    if not migrations_dir.is_dir():
        return []
    found: dict[int, MigrationFile] = {}
    for path in sorted(migrations_dir.glob("*.sql")):
        match = FILE_RE.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files are named NNNN_description.sql (e.g. 0002_add_unit.sql); "
                                 "rename or remove it")
        number = int(match.group(1))
        if number in found:
            raise MigrationError(
                f"{migrations_dir}: {found[number].name} and {path.name} share the number {number:04d} "
                "(two branches each generated one?); delete the newer one and run `nerve sense migrate` again"
            )
        found[number] = MigrationFile(number, path)
    return [found[n] for n in sorted(found)]


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (a ';' inside a string or trigger body does not split)."""
    statements: list[str] = []
    buffer = ""
    for piece in sql.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if _has_code(buffer):
                statements.append(buffer.strip())
            buffer = ""
    if _has_code(buffer[:-1]):
        statements.append(buffer[:-1].strip())  # a last statement without ';'
    return statements


def _has_code(sql: str) -> bool:
    """True when `sql` holds more than comments, whitespace and semicolons."""
    without = re.sub(r"--[^\n]*|/\*.*?\*/", "", sql, flags=re.S)
    return bool(without.replace(";", "").strip())


def ensure_engine_tables(conn: sqlite3.Connection) -> None:
    with _autocommit(conn):
        _transaction(conn, ENGINE_TABLES_SQL, "creating the engine tables")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(_nerve_cursors)")}
        if "identity" not in columns:
            _transaction(conn, (CURSOR_IDENTITY,), "adding identities to the cursors")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(_signals)")}
        missing = tuple(sql for name, sql in SIGNAL_COLUMNS.items() if name not in columns)
        if missing:
            _transaction(conn, missing, "adding schema versions and hashes to the signals")


def apply_migrations(conn: sqlite3.Connection, migrations_dir: Path) -> list[str]:
    """Apply pending migration files in order; returns the names applied (empty when up to date).

    Raises MigrationError for an edited or missing applied file, or a file that fails
    (which is rolled back whole, leaving the database as the previous file left it).
    """
    migrations_dir = Path(migrations_dir)
    sense = migrations_dir.parent.name
    ensure_engine_tables(conn)
    files = migration_files(migrations_dir)
    applied = _applied(conn, sense)
    _check_applied(files, applied, migrations_dir, sense)
    pending = [f for f in files if f.name not in applied]
    _check_order(pending, [f for f in files if f.name in applied], sense)
    with _autocommit(conn):
        if pending:
            views.drop_own(conn)  # a table rebuild cannot rename past a view of the dropped table
        done = [m.name for m in pending if _apply_one(conn, m)]
        views.sync(conn, views.sense_views(conn))
        return done


def _applied(conn: sqlite3.Connection, sense: str) -> dict[str, str]:
    """name → checksum of the applied migrations; MigrationError when the table holds what Nerve never writes
    (a damaged page that still reads: NULL, a number or a blob where a name or checksum belongs)."""
    rows = conn.execute("SELECT name, checksum FROM _migrations").fetchall()
    for name, checksum in rows:
        if not isinstance(name, str) or not isinstance(checksum, str):
            raise MigrationError(
                f"data/senses/{sense}.db is damaged: its _migrations table holds a row Nerve never writes (name "
                f"{_shown(name)}, checksum {_shown(checksum)}); restore it from a backup, or delete "
                f"data/senses/{sense}.db to rebuild it from the migrations (its rows are lost)")
    return dict(rows)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _fix_hint(sense: str) -> str:
    return (
        f"migrations are append-only: revert the edit and generate a new migration with `nerve sense migrate {sense}`; "
        f"or delete data/senses/{sense}.db to rebuild from scratch"
    )


def _check_applied(files: list[MigrationFile], applied: dict[str, str], migrations_dir: Path, sense: str) -> None:
    by_name = {f.name: f for f in files}
    for name, checksum in applied.items():
        file = by_name.get(name)
        if file is None:
            raise MigrationError(
                f"migration {name} was applied to this sense's database but {migrations_dir / name} is missing; "
                f"restore it (git checkout), or delete data/senses/{sense}.db to rebuild from scratch"
            )
        if file.checksum() != checksum:
            raise MigrationError(f"{file.path} was edited after it was applied; {_fix_hint(sense)}")


def _check_order(pending: list[MigrationFile], applied: list[MigrationFile], sense: str) -> None:
    if pending and applied and pending[0].number < applied[-1].number:
        raise MigrationError(
            f"{pending[0].path} is not applied but the later {applied[-1].name} is; it was generated against an "
            f"older schema. Delete it and run `nerve sense migrate {sense}` again"
        )


def _apply_one(conn: sqlite3.Connection, migration: MigrationFile) -> bool:
    statements = split_statements(migration.text())
    record = (
        "INSERT INTO _migrations (name, checksum, applied_at) VALUES (?, ?, ?)",
        (migration.name, migration.checksum(), now_ms()),
    )
    return _transaction(conn, statements, str(migration.path), record=record)


def _transaction(conn: sqlite3.Connection, statements, label: str, record: tuple | None = None) -> bool:
    """Run statements in one transaction with foreign keys off (a table rebuild must not cascade).

    `PRAGMA foreign_keys` is a no-op inside a transaction, so it is switched before BEGIN
    and restored after; `foreign_key_check` before COMMIT keeps integrity honest.
    """
    fk_was_on = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys=OFF")
    try:
        # IMMEDIATE takes the write lock first, so two processes opening the same
        # database cannot both apply a file: the second sees it recorded and skips it.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if record and conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (record[1][0],)).fetchone():
                conn.execute("ROLLBACK")
                return False
            for statement in statements:
                _execute(conn, statement, label)
            problems = conn.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise MigrationError(f"{label}: leaves foreign keys broken ({problems[:3]}); nothing was applied")
            if record:
                conn.execute(*record)
            conn.execute("COMMIT")
            return True
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        if fk_was_on:
            conn.execute("PRAGMA foreign_keys=ON")


def _execute(conn: sqlite3.Connection, statement: str, label: str) -> None:
    try:
        conn.execute(statement)
    except sqlite3.Error as exc:
        short = " ".join(statement.split())
        short = short if len(short) <= 120 else short[:117] + "..."
        raise MigrationError(f"{label} failed, nothing of it was applied: {exc} (in: {short})") from exc


class _autocommit:
    """Run with `isolation_level=None` so our explicit BEGIN/COMMIT are the only transactions."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        if self.conn.in_transaction:
            raise MigrationError("cannot apply migrations inside an open transaction; commit or roll back first")
        self.saved = self.conn.isolation_level
        self.conn.isolation_level = None
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.isolation_level = self.saved
