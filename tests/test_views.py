"""Readable views: created where each database is opened, kept through table rebuilds, never touching user views."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nerve_cli.schema.apply import apply_migrations
from nerve_cli.schema.declare import table
from nerve_cli.store.logs import LogStore
from nerve_cli.store.sensedb import write_archive_map

INIT = "CREATE TABLE sample (ts INTEGER PRIMARY KEY, value REAL NOT NULL);\n"
# the create-copy-drop-rename sequence `nerve sense migrate` writes for changes ALTER TABLE cannot do
REBUILD = """
CREATE TABLE sample_new (ts INTEGER PRIMARY KEY, value REAL, unit TEXT);
INSERT INTO sample_new (ts, value) SELECT ts, value FROM sample;
DROP TABLE sample;
ALTER TABLE sample_new RENAME TO sample;
"""


@table(pk="ts", time="ts")
class Sample:
    ts: int
    value: float


def views(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}


def test_logs_db_gets_views_with_a_readable_time(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    old = sqlite3.connect(path)  # an instance from before the views: only the tables
    old.execute("CREATE TABLE logs (id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, type TEXT NOT NULL, "
                "ref_id TEXT, payload TEXT, ts INTEGER NOT NULL)")
    old.execute("INSERT INTO logs (source, type, ts) VALUES ('system', 'engine_started', 1700000000123)")
    old.commit()
    old.close()
    LogStore(path).close()
    conn = sqlite3.connect(path)
    assert {"logs_view", "workflow_runs_view"} <= views(conn)
    assert conn.execute("SELECT time, ts FROM logs_view").fetchone() == ("2023-11-14T22:13:20.123Z", 1700000000123)


def test_sense_views_survive_a_table_rebuild_and_leave_user_views_alone(tmp_path: Path) -> None:
    migrations = tmp_path / "s" / "migrations"
    migrations.mkdir(parents=True)
    (migrations / "0001_init.sql").write_text(INIT)
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    apply_migrations(conn, migrations)
    write_archive_map(conn, [Sample.__nerve_table__])
    conn.execute("CREATE VIEW mine AS SELECT value FROM sample")
    conn.execute("INSERT INTO sample VALUES (1700000000000, 1.5)")
    assert {"signals_view", "sample_view", "mine"} <= views(conn)

    (migrations / "0002_rebuild.sql").write_text(REBUILD)
    conn.execute("DROP VIEW mine")  # the user's own view is theirs to manage; ours must not block the rename
    assert apply_migrations(conn, migrations) == ["0002_rebuild.sql"]
    write_archive_map(conn, [Sample.__nerve_table__])
    assert conn.execute("SELECT time, value, unit FROM sample_view").fetchone() == ("2023-11-14T22:13:20.000Z", 1.5, None)
    conn.execute("CREATE VIEW mine AS SELECT value FROM sample")
    write_archive_map(conn, [])  # no time column any more: our view goes, the user's stays
    assert "sample_view" not in views(conn) and {"signals_view", "mine"} <= views(conn)
