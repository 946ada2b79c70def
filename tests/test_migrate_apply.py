"""Applying migration files to a real sense database: order, idempotence, tampering, rollback, rebuild."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nerve_cli.errors import MigrationError
from nerve_cli.schema.migrate import apply_migrations, split_statements


def sense_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    migrations = tmp_path / "senses" / "demo" / "migrations"
    migrations.mkdir(parents=True, exist_ok=True)
    for name, sql in files.items():
        (migrations / name).write_text(sql)
    return migrations


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def schema_of(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


FILES = {
    "0001_init.sql": "CREATE TABLE sample (ts INTEGER PRIMARY KEY, value REAL NOT NULL);\n",
    "0002_add_unit.sql": "-- comment; with a semicolon\nALTER TABLE sample ADD COLUMN unit TEXT DEFAULT 'a;b';\n",
    "0010_index.sql": "CREATE INDEX idx_sample_value ON sample (value);",
}


def test_applies_in_numeric_order_and_records_each(tmp_path):
    migrations = sense_dir(tmp_path, FILES)
    conn = connect(tmp_path / "demo.db")
    assert apply_migrations(conn, migrations) == ["0001_init.sql", "0002_add_unit.sql", "0010_index.sql"]
    rows = conn.execute("SELECT name, length(checksum), applied_at > 0 FROM _migrations ORDER BY name").fetchall()
    assert rows == [("0001_init.sql", 64, 1), ("0002_add_unit.sql", 64, 1), ("0010_index.sql", 64, 1)]
    cols = [r[1] for r in conn.execute("PRAGMA table_info(sample)")]
    assert cols == ["ts", "value", "unit"]
    conn.execute("INSERT INTO sample (ts, value) VALUES (1, 2.0)")
    assert conn.execute("SELECT unit FROM sample").fetchone()[0] == "a;b"


def test_engine_tables_created_even_without_migrations(tmp_path):
    conn = connect(tmp_path / "demo.db")
    assert apply_migrations(conn, tmp_path / "senses" / "demo" / "migrations") == []
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"_migrations", "_signals", "_nerve_archive", "idx__signals_ts"} <= names
    cols = [(r[1], r[2], r[3], r[5]) for r in conn.execute("PRAGMA table_info(_signals)")]
    assert cols == [("id", "INTEGER", 0, 1), ("ts", "INTEGER", 1, 0), ("payload", "TEXT", 1, 0),
                    ("schema_version", "TEXT", 0, 0), ("hash", "TEXT", 0, 0)]  # set when a sense's settings ask


def test_idempotent_and_applies_only_new_files(tmp_path):
    migrations = sense_dir(tmp_path, {"0001_init.sql": FILES["0001_init.sql"]})
    conn = connect(tmp_path / "demo.db")
    assert apply_migrations(conn, migrations) == ["0001_init.sql"]
    assert apply_migrations(conn, migrations) == []
    sense_dir(tmp_path, {"0002_add_unit.sql": FILES["0002_add_unit.sql"]})
    assert apply_migrations(conn, migrations) == ["0002_add_unit.sql"]
    assert apply_migrations(connect(tmp_path / "demo.db"), migrations) == []


def test_edited_applied_migration_is_refused_naming_the_file(tmp_path):
    migrations = sense_dir(tmp_path, FILES)
    conn = connect(tmp_path / "demo.db")
    apply_migrations(conn, migrations)
    (migrations / "0002_add_unit.sql").write_text("ALTER TABLE sample ADD COLUMN unit TEXT;\n")
    with pytest.raises(MigrationError) as info:
        apply_migrations(conn, migrations)
    message = str(info.value)
    assert "0002_add_unit.sql" in message
    assert "migrations are append-only" in message
    assert "nerve sense migrate demo" in message
    assert "data/senses/demo.db" in message


def test_missing_applied_migration_is_refused(tmp_path):
    migrations = sense_dir(tmp_path, FILES)
    conn = connect(tmp_path / "demo.db")
    apply_migrations(conn, migrations)
    (migrations / "0010_index.sql").unlink()
    with pytest.raises(MigrationError, match="0010_index.sql.*missing"):
        apply_migrations(conn, migrations)


def test_failing_migration_rolls_back_whole_and_names_file_and_error(tmp_path):
    migrations = sense_dir(tmp_path, {
        "0001_init.sql": FILES["0001_init.sql"],
        "0002_broken.sql": "CREATE TABLE extra (x INTEGER);\nINSERT INTO extra VALUES (1);\nALTER TABLE nope ADD COLUMN y TEXT;\n",
    })
    conn = connect(tmp_path / "demo.db")
    with pytest.raises(MigrationError) as info:
        apply_migrations(conn, migrations)
    assert "0002_broken.sql" in str(info.value)
    assert "no such table: nope" in str(info.value)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "sample" in names and "extra" not in names
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == ["0001_init.sql"]
    assert not conn.in_transaction
    # fixing the file lets it apply (it was never recorded)
    (migrations / "0002_broken.sql").write_text("CREATE TABLE extra (x INTEGER);\n")
    assert apply_migrations(conn, migrations) == ["0002_broken.sql"]


def test_deleting_the_db_rebuilds_the_same_schema(tmp_path):
    migrations = sense_dir(tmp_path, FILES)
    db = tmp_path / "demo.db"
    conn = connect(db)
    apply_migrations(conn, migrations)
    before = schema_of(conn)
    conn.close()
    db.unlink()
    conn = connect(db)
    assert len(apply_migrations(conn, migrations)) == 3
    assert schema_of(conn) == before


def test_foreign_keys_are_off_during_a_rebuild_and_restored(tmp_path):
    migrations = sense_dir(tmp_path, {
        "0001_init.sql": "CREATE TABLE parent (id INTEGER PRIMARY KEY);\n"
        "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE);\n",
    })
    conn = connect(tmp_path / "demo.db")
    conn.execute("PRAGMA foreign_keys=ON")
    apply_migrations(conn, migrations)
    conn.execute("INSERT INTO parent VALUES (1)")
    conn.execute("INSERT INTO child VALUES (1, 1)")
    conn.commit()
    sense_dir(tmp_path, {"0002_rebuild_parent.sql": "CREATE TABLE parent_new (id INTEGER PRIMARY KEY, name TEXT);\n"
                         "INSERT INTO parent_new (id) SELECT id FROM parent;\nDROP TABLE parent;\n"
                         "ALTER TABLE parent_new RENAME TO parent;\n"})
    apply_migrations(conn, migrations)
    assert conn.execute("SELECT count(*) FROM child").fetchone()[0] == 1  # not cascaded away
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_open_transaction_is_refused(tmp_path):
    migrations = sense_dir(tmp_path, FILES)
    conn = connect(tmp_path / "demo.db")
    apply_migrations(conn, migrations)
    conn.execute("INSERT INTO sample (ts, value) VALUES (1, 1.0)")  # implicit BEGIN
    sense_dir(tmp_path, {"0011_more.sql": "CREATE TABLE more (x INTEGER);"})
    with pytest.raises(MigrationError, match="open transaction"):
        apply_migrations(conn, migrations)


def test_badly_named_and_duplicate_numbered_files_are_refused(tmp_path):
    migrations = sense_dir(tmp_path, {"0001_init.sql": "SELECT 1;", "notes.sql": "SELECT 1;"})
    with pytest.raises(MigrationError, match="notes.sql"):
        apply_migrations(connect(tmp_path / "a.db"), migrations)
    (migrations / "notes.sql").unlink()
    sense_dir(tmp_path, {"0001_other.sql": "SELECT 1;"})
    with pytest.raises(MigrationError, match="share the number 0001"):
        apply_migrations(connect(tmp_path / "b.db"), migrations)


def test_pending_file_older_than_an_applied_one_is_refused(tmp_path):
    migrations = sense_dir(tmp_path, {"0001_init.sql": FILES["0001_init.sql"], "0003_x.sql": "SELECT 1;"})
    conn = connect(tmp_path / "demo.db")
    apply_migrations(conn, migrations)
    sense_dir(tmp_path, {"0002_late.sql": "SELECT 1;"})
    with pytest.raises(MigrationError, match="0002_late.sql is not applied but the later 0003_x.sql is"):
        apply_migrations(conn, migrations)


def test_split_statements_respects_strings_comments_and_triggers():
    sql = (
        "-- header; comment\n"
        "CREATE TABLE t (a TEXT DEFAULT 'x;y');\n"
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET a = 'z'; END;\n"
        "/* trailing; */\n"
        "INSERT INTO t VALUES ('q')"
    )
    parts = split_statements(sql)
    assert len(parts) == 3
    assert parts[0] == "-- header; comment\nCREATE TABLE t (a TEXT DEFAULT 'x;y');"
    assert parts[1].startswith("CREATE TRIGGER") and parts[1].endswith("END;")
    assert parts[2] == "/* trailing; */\nINSERT INTO t VALUES ('q');"
