"""One read-only SQL query on a database, for someone we do not fully trust (an agent through `nerve mcp`).

Read-only is enforced by SQLite itself, three times over, never by reading the
SQL text: the file is opened `mode=ro` with `PRAGMA query_only`, and an
authorizer allows only reading actions (SELECT, reading columns, functions,
recursive CTEs, a few introspection pragmas) — anything else (INSERT, UPDATE,
DELETE, CREATE, DROP, ATTACH, a pragma that sets something, a transaction) is
refused when the statement is prepared, before it can run. One statement per
call. Limits, each enforced by SQLite or between its steps, never by hoping:
- time: a progress handler interrupts the query past `timeout`, and rows stop
  being read past it. Every step is short, because
- no value may be larger than `MAX_VALUE_BYTES` (SQLite's own length limit on
  the connection): `hex(zeroblob(400000000))` fails at once instead of
  building 800 MB;
- at most `max_rows` rows and `MAX_RESULT_BYTES` of values come back
  (`truncated` says when there were more, `truncated_by` which bound stopped it).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nerve_cli.errors import ErrorType, NerveError, SenseError
from nerve_cli.store.sqlitefile import open_reader

MAX_ROWS, MAX_TIMEOUT = 1000, 10.0
MAX_VALUE_BYTES = 16 * 1024 * 1024  # a stored signal payload (at most 16 MiB - 64 KiB) still reads whole
MAX_RESULT_BYTES = 16 * 1024 * 1024
READING = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
                "table_list", "database_list", "collation_list", "function_list"}
# authorizer action codes → what the statement would do (error codes share these numbers: name them explicitly)
_ACTIONS = {getattr(sqlite3, f"SQLITE_{n}"): n.replace("_", " ").lower() for n in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE",
    "DROP_VTABLE", "SAVEPOINT") if hasattr(sqlite3, f"SQLITE_{n}")}
_ACTIONS.update({sqlite3.SQLITE_INSERT: "insert into", sqlite3.SQLITE_DELETE: "delete from",
                 sqlite3.SQLITE_UPDATE: "update", sqlite3.SQLITE_TRANSACTION: "begin or end a transaction:",
                 sqlite3.SQLITE_PRAGMA: "set or read pragma"})


class QueryRefused(NerveError):
    """The statement would change something (or is not one statement): nothing ran."""

    type = ErrorType.QUERY_REFUSED


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated_by: str | None  # "rows" (more matched than max_rows) or "bytes" (past MAX_RESULT_BYTES), or None
    elapsed_s: float

    @property
    def truncated(self) -> bool:
        return self.truncated_by is not None

    def to_json(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": self.rows, "row_count": len(self.rows),
                "truncated": self.truncated, "truncated_by": self.truncated_by, "elapsed_s": self.elapsed_s}


def read_query(path: Path, sql: str, params: list[Any] | dict[str, Any] | None = None, *,
               max_rows: int = 100, timeout: float = 2.0) -> QueryResult:
    """Run `sql` read-only on the database at `path`; QueryRefused for a write, NerveError for other failures."""
    max_rows = max(1, min(int(max_rows), MAX_ROWS))
    timeout = max(0.01, min(float(timeout), MAX_TIMEOUT))
    if not Path(path).is_file():
        raise SenseError(f"{path} does not exist yet (the sense has not computed)")
    conn = open_reader(Path(path))
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    denied: list[str] = []
    conn.set_authorizer(lambda action, arg1, arg2, db, trigger: _authorize(action, arg1, arg2, denied))
    deadline = time.monotonic() + timeout
    conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
    started = time.perf_counter()
    rows: list[list[Any]] = []
    truncated_by = None
    try:
        cursor = conn.execute(sql, params or ())
        columns = [d[0] for d in cursor.description or ()]
        room = MAX_RESULT_BYTES
        for row in cursor:
            if len(rows) == max_rows:
                truncated_by = "rows"
                break
            room -= sum(_size(v) for v in row)
            if room < 0:
                truncated_by = "bytes"
                break
            rows.append([_jsonable(v) for v in row])
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError("interrupted")
    except sqlite3.ProgrammingError as exc:  # "You can only execute one statement at a time."
        raise QueryRefused(f"query refused: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise _failure(exc, denied, timeout) from None
    except (ValueError, sqlite3.Warning) as exc:
        raise QueryRefused(f"query refused: {exc}") from None
    finally:
        conn.close()
    return QueryResult(columns, rows, truncated_by, round(time.perf_counter() - started, 6))


def _authorize(action: int, arg1: str | None, arg2: str | None, denied: list[str]) -> int:
    if action in READING:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    denied.append(_ACTIONS.get(action, f"action {action}") + (f" {arg1}" if arg1 else ""))
    return sqlite3.SQLITE_DENY


def _failure(exc: sqlite3.DatabaseError, denied: list[str], timeout: float) -> NerveError:
    text = str(exc)
    if denied:
        # DROP and CREATE first edit sqlite_master: name the user's own object when SQLite reports it
        what = next((d for d in denied if not d.endswith("sqlite_master")), denied[0])
        return QueryRefused(f"query refused: only reading is allowed, and this statement would {what} "
                            "(read with SELECT; nothing ran)")
    if "interrupted" in text:
        return NerveError(f"query stopped after {timeout:g}s (the time limit): narrow it with WHERE or LIMIT")
    if "too big" in text:
        return NerveError(f"query stopped: it makes a value larger than {MAX_VALUE_BYTES // 2**20} MiB, the limit "
                          "of one value here; select length(x) or substr(x, 1, n) instead of the whole value")
    if "readonly" in text or "read-only" in text:
        return QueryRefused(f"query refused: the database is opened read-only ({text})")
    return NerveError(f"query failed: {text}")


def _size(value: Any) -> int:
    """Bytes a value costs in the answer (a blob is shown as its size, which costs little)."""
    if isinstance(value, str):
        return len(value)
    return 16


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": len(value)}  # blobs are not shown, only their size
    return value
