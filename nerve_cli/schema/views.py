"""Readable views beside the engine's tables: the same rows with an ISO `time` column next to unix-ms `ts`.

Database browsers (Datasette, sqlite3, DB Browser) show `ts` as a 13-digit
number, and plugins that render timestamps expect seconds; a view with
`time` as text reads at once. The views are created by the code that opens
each database (LogStore for logs.db, the migration runner for a sense's
database), so existing instances get them on their next start.

Every view carries a marker comment in its SQL so Nerve only ever touches
its own; `sync_*` rewrites a view only when its SQL changed.
"""

from __future__ import annotations

import sqlite3

MARKER = "/* nerve: readable view */"
ISO = "strftime('%Y-%m-%dT%H:%M:%fZ', {col} / 1000.0, 'unixepoch')"

LOGS_VIEWS = {
    "logs_view": f"SELECT id, {ISO.format(col='ts')} AS time, source, type, ref_id, payload, ts FROM logs",
    "workflow_runs_view": f"SELECT run_id, workflow, status, {ISO.format(col='ts')} AS time, ts FROM workflow_runs",
}
EVENTS_VIEWS = {  # data/events.db (store/events.py)
    "events_view": f"SELECT id, {ISO.format(col='ts')} AS time, channel, payload, key, origin, via, schema_version, hash, "
                   "ts FROM events",
}


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def view_sql(name: str, select: str) -> str:
    return f"CREATE VIEW {q(name)} AS {MARKER} {select}"


def own_views(conn: sqlite3.Connection) -> dict[str, str]:
    """name → SQL of the views Nerve created in this database."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'").fetchall()
    return {name: sql for name, sql in rows if sql and MARKER in sql}


def sense_views(conn: sqlite3.Connection) -> dict[str, str]:
    """`signals_view` over `_signals`, and `<table>_view` for each table with a `time=` column."""
    wanted = {"signals_view": f"SELECT id, {ISO.format(col='ts')} AS time, payload, ts FROM _signals"}
    taken = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    if "_nerve_archive" in taken:
        for table, column in conn.execute("SELECT table_name, time_column FROM _nerve_archive ORDER BY table_name"):
            name = f"{table}_view"
            if table in taken and not table.startswith("_") and (name not in taken or name in own_views(conn)):
                wanted[name] = f"SELECT {ISO.format(col=q(column))} AS time, * FROM {q(table)}"
    return wanted


def sync(conn: sqlite3.Connection, wanted: dict[str, str]) -> bool:
    """Make Nerve's views exactly `wanted` (name → SELECT); True when anything changed. Autocommit connection."""
    have = own_views(conn)
    target = {name: view_sql(name, select) for name, select in wanted.items()}
    if have == target:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name, sql in have.items():
            if target.get(name) != sql:
                conn.execute(f"DROP VIEW {q(name)}")
        for name, sql in target.items():
            if have.get(name) != sql:
                conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def drop_own(conn: sqlite3.Connection) -> None:
    """Drop Nerve's views before migrations run: SQLite refuses to rename a table while a view names a missing one,
    which is exactly the middle of a create-copy-drop-rename rebuild. Autocommit connection."""
    have = own_views(conn)
    if have:
        conn.execute("BEGIN IMMEDIATE")
        for name in have:
            conn.execute(f"DROP VIEW {q(name)}")
        conn.execute("COMMIT")
