"""What a projection keeps per set of parameter values, and how bindings narrow a source's events in SQL.

A sense whose reflexes bind parameters (`bindings: {repo: $repo}`) is a
family of projections, one per set of values. Each keeps, in the sense's own
database, a row of `_nerve_bindings`: its values (`params`), its cursor per
source (`cursors`, JSON) and its current value (`value`: what its last
signalling compute returned). The row is written inside the compute's
transaction, like `_nerve_cursors` for a sense without parameters: the events
are consumed exactly once per set of values.

A binding keeps the events whose payload holds the wanted value at a key
(`json_extract(payload, '$."repo"') = ?`; a list of values is `IN`), so the
narrowing happens in SQLite, not in the compute.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Mapping

import orjson

from nerve_cli.store.cursor import Cursor

BINDINGS = "_nerve_bindings"
BINDINGS_SQL = (f"CREATE TABLE IF NOT EXISTS {BINDINGS} (binding TEXT PRIMARY KEY, params TEXT NOT NULL, "
                "cursors TEXT NOT NULL, value TEXT, value_ts INTEGER, ts INTEGER NOT NULL)")


def json_path(key: str) -> str:
    """`pr.repo` → `$."pr"."repo"` (each part quoted: a key may hold `-`)."""
    return "$" + "".join(f'."{part}"' for part in key.split("."))


def where(wanted: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL conditions (` AND ...`) on `payload` for a source's bindings, and their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in (wanted or {}).items():
        values = value if isinstance(value, list) else [value]
        marks = ", ".join("?" for _ in values)
        clauses.append(f" AND json_extract(payload, ?) IN ({marks})")
        params.append(json_path(key))
        params.extend(_sql_value(v) for v in values)
    return "".join(clauses), params


def _sql_value(value: Any) -> Any:
    """json_extract gives true/false as 1/0."""
    return int(value) if isinstance(value, bool) else value


def read_binding(conn: sqlite3.Connection, binding: str) -> tuple[dict[str, Cursor], Any, int | None]:
    """(cursors, value, value_ts) of one set of values; nothing consumed yet: ({}, None, None)."""
    try:
        row = conn.execute(f"SELECT cursors, value, value_ts, ts FROM {BINDINGS} WHERE binding = ?",
                           (binding,)).fetchone()
    except sqlite3.OperationalError:  # no bound compute has committed yet
        return {}, None, None
    if row is None:
        return {}, None, None
    # each source's cursor is [last_id, identity of the source database it counted in]
    cursors = {source: Cursor(at[0], at[1] if len(at) > 1 else None, row[3])  # ts: when it last consumed
               for source, at in orjson.loads(row[0]).items()}
    return cursors, (orjson.loads(row[1]) if row[1] is not None else None), row[2]


def write_binding(conn: sqlite3.Connection, binding: str, params: Mapping[str, Any], cursors: Mapping[str, Cursor],
                  ts: int, value: bytes | str | None = None) -> None:
    """Inside the caller's transaction: advance its cursors, and its value when the compute returned one."""
    conn.execute(BINDINGS_SQL)
    old, _, _ = read_binding(conn, binding)
    merged = orjson.dumps({source: [c.last_id, c.identity] for source, c in {**old, **cursors}.items()}).decode()
    text = value.decode() if isinstance(value, bytes) else value
    conn.execute(
        f"INSERT INTO {BINDINGS} (binding, params, cursors, value, value_ts, ts) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(binding) DO UPDATE SET cursors = excluded.cursors, ts = excluded.ts, "
        "value = coalesce(excluded.value, value), value_ts = coalesce(excluded.value_ts, value_ts)",
        (binding, orjson.dumps(dict(params), option=orjson.OPT_SORT_KEYS).decode(), merged, text,
         ts if text is not None else None, ts))


def all_bindings(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every set of values read so far: params, value, value_ts, ts (when it last consumed), oldest first."""
    try:
        rows = conn.execute(f"SELECT params, value, value_ts, ts FROM {BINDINGS} ORDER BY rowid").fetchall()
    except sqlite3.OperationalError:
        return []
    return [{"params": orjson.loads(p), "value": orjson.loads(v) if v is not None else None, "value_ts": vt,
             "ts": ts} for p, v, vt, ts in rows]
