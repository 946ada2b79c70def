"""Generating migrations from schema.py: one per kind of change, verified by applying them to real SQLite files."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest

from nerve_cli.errors import MigrationError, SenseError
from nerve_cli.schema.diff import HEADER, _verify, load_specs
from nerve_cli.schema.migrate import apply_migrations, generate_migration

PRELUDE = "from __future__ import annotations\nfrom nerve_cli.sdk import table, index\n"


@pytest.fixture
def sense(tmp_path: Path) -> Path:
    path = tmp_path / "senses" / "demo"
    path.mkdir(parents=True)
    return path


def write_schema(sense_dir: Path, body: str) -> None:
    (sense_dir / "schema.py").write_text(PRELUDE + textwrap.dedent(body))


def migrate(sense_dir: Path, body: str, **kwargs) -> Path | None:
    write_schema(sense_dir, body)
    return generate_migration(sense_dir, **kwargs)


def open_db(sense_dir: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(sense_dir.parent.parent / "demo.db", isolation_level=None)
    apply_migrations(conn, sense_dir / "migrations")
    return conn


def columns(conn: sqlite3.Connection, table: str) -> dict[str, tuple]:
    return {r[1]: (r[2], r[3], r[4], r[5]) for r in conn.execute(f"PRAGMA table_info({table})")}


def indexes(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA index_list({table})") if r[3] == "c"}


BASE = """
@table(pk="ts", time="ts")
class Sample:
    ts: int
    value: float
"""


def test_first_migration_is_0001_init_and_nothing_when_unchanged(sense):
    path = migrate(sense, BASE)
    assert path == sense / "migrations" / "0001_init.sql"
    text = path.read_text()
    assert text.splitlines()[0] == HEADER
    assert 'CREATE TABLE "sample"' in text
    conn = open_db(sense)
    assert columns(conn, "sample") == {"ts": ("INTEGER", 0, None, 1), "value": ("REAL", 1, None, 0)}
    assert generate_migration(sense) is None
    assert sorted(p.name for p in (sense / "migrations").iterdir()) == ["0001_init.sql"]


def test_new_table(sense):
    migrate(sense, BASE)
    path = migrate(sense, BASE + """
@table(pk="id", indexes=["kind"])
class Events:
    id: int
    kind: str
""")
    assert path.name == "0002_create_events.sql"
    assert "ALTER" not in path.read_text() and 'CREATE TABLE "sample"' not in path.read_text()
    conn = open_db(sense)
    assert set(columns(conn, "events")) == {"id", "kind"}
    assert indexes(conn, "events") == {"idx_events_kind"}
    assert generate_migration(sense) is None


def test_new_nullable_and_defaulted_columns_use_add_column(sense):
    migrate(sense, BASE)
    conn = open_db(sense)
    conn.execute("INSERT INTO sample VALUES (1, 0.5)")
    path = migrate(sense, BASE + "    unit: str | None = None\n")
    assert path.name == "0002_add_unit.sql"
    assert 'ALTER TABLE "sample" ADD COLUMN "unit" TEXT;' in path.read_text()
    path = migrate(sense, BASE + "    unit: str | None = None\n    scale: int = 1\n")
    assert path.name == "0003_add_scale.sql"
    assert 'ADD COLUMN "scale" INTEGER NOT NULL DEFAULT 1;' in path.read_text()
    assert "CREATE TABLE" not in path.read_text()
    conn = open_db(sense)
    assert conn.execute("SELECT ts, value, unit, scale FROM sample").fetchall() == [(1, 0.5, None, 1)]


def test_column_added_mid_class_needs_no_rebuild_and_order_is_not_a_change(sense):
    migrate(sense, BASE)
    path = migrate(sense, '@table(pk="ts")\nclass Sample:\n    ts: int\n    unit: str | None = None\n    value: float\n')
    assert "ADD COLUMN" in path.read_text() and "CREATE TABLE" not in path.read_text()
    assert generate_migration(sense) is None


def test_new_not_null_column_without_default_is_refused(sense):
    migrate(sense, BASE)
    with pytest.raises(MigrationError) as info:
        migrate(sense, BASE + "    unit: str\n")
    assert "sample.unit" in str(info.value)
    assert "give it a default" in str(info.value) and "Optional" in str(info.value)
    assert not (sense / "migrations" / "0002_add_unit.sql").exists()


def test_new_and_dropped_index(sense):
    migrate(sense, BASE)
    path = migrate(sense, BASE.replace('time="ts")', 'time="ts", indexes=["value"], unique=[("ts", "value")])'))
    assert path.name == "0002_index_value_index_ts_value.sql"
    text = path.read_text()
    assert 'CREATE INDEX "idx_sample_value" ON "sample" ("value");' in text
    assert 'CREATE UNIQUE INDEX "idx_sample_ts_value"' in text
    assert indexes(open_db(sense), "sample") == {"idx_sample_value", "idx_sample_ts_value"}
    path = migrate(sense, BASE.replace('time="ts")', 'time="ts", indexes=["value"])'))
    assert path.name == "0003_drop_index_ts_value.sql"
    assert path.read_text().count("\n\n") == 1 and 'DROP INDEX "idx_sample_ts_value";' in path.read_text()
    assert indexes(open_db(sense), "sample") == {"idx_sample_value"}


def test_type_change_rebuilds_the_table_and_keeps_rows(sense):
    migrate(sense, BASE + '    label: str | None = None\n', )
    conn = open_db(sense)
    conn.executemany("INSERT INTO sample (ts, value, label) VALUES (?, ?, ?)", [(1, 1.5, "7"), (2, 2.5, None)])
    path = migrate(sense, BASE + '    label: int | None = None\n')
    assert path.name == "0002_transform_sample.sql"
    text = path.read_text()
    assert 'CREATE TABLE "sample_new_0002"' in text and 'DROP TABLE "sample";' in text
    conn = open_db(sense)
    assert columns(conn, "sample")["label"][0] == "INTEGER"
    assert conn.execute("SELECT ts, value, label FROM sample ORDER BY ts").fetchall() == [(1, 1.5, 7), (2, 2.5, None)]
    assert generate_migration(sense) is None


def test_not_null_relaxed_and_tightened(sense):
    migrate(sense, BASE)
    conn = open_db(sense)
    conn.execute("INSERT INTO sample VALUES (1, 1.0)")
    migrate(sense, BASE.replace("value: float", "value: float | None = None"))
    conn = open_db(sense)
    assert columns(conn, "sample")["value"][1] == 0
    conn.execute("INSERT INTO sample VALUES (2, NULL)")
    with pytest.raises(MigrationError, match="sample.value becomes NOT NULL.*default"):
        migrate(sense, BASE)
    path = migrate(sense, BASE.replace("value: float", "value: float = -1.0"))
    assert "UPDATE" in path.read_text()
    conn = open_db(sense)
    assert columns(conn, "sample")["value"][1:3] == (1, "-1.0")
    assert conn.execute("SELECT ts, value FROM sample ORDER BY ts").fetchall() == [(1, 1.0), (2, -1.0)]


def test_pk_change(sense):
    migrate(sense, BASE)
    conn = open_db(sense)
    conn.execute("INSERT INTO sample VALUES (1, 1.0)")
    path = migrate(sense, BASE.replace('pk="ts"', 'pk=("ts", "host")') + '    host: str = "local"\n')
    assert path.name == "0002_transform_sample_add_host.sql"
    assert "-- rebuild table sample: primary key (ts) -> (ts, host)" in path.read_text()
    conn = open_db(sense)
    info = columns(conn, "sample")
    assert (info["ts"][3], info["host"][3]) == (1, 2)
    assert conn.execute("SELECT ts, value, host FROM sample").fetchall() == [(1, 1.0, "local")]
    conn.execute("INSERT INTO sample VALUES (1, 2.0, 'other')")  # the new key allows it
    assert generate_migration(sense) is None


def test_dropped_column_refused_then_written_with_flag(sense):
    migrate(sense, BASE + "    unit: str | None = None\n")
    conn = open_db(sense)
    conn.execute("INSERT INTO sample VALUES (1, 1.0, 'ms')")
    with pytest.raises(MigrationError) as info:
        migrate(sense, BASE)
    assert "table sample: column unit" in str(info.value) and "--allow-data-loss" in str(info.value)
    assert len(list((sense / "migrations").iterdir())) == 1
    path = migrate(sense, BASE, allow_data_loss=True)
    assert path.name == "0002_drop_unit.sql"
    conn = open_db(sense)
    assert set(columns(conn, "sample")) == {"ts", "value"}
    assert conn.execute("SELECT * FROM sample").fetchall() == [(1, 1.0)]


def test_dropped_table_refused_then_written_with_flag(sense):
    migrate(sense, BASE + '\n@table()\nclass OldEvents:\n    x: int\n')
    with pytest.raises(MigrationError) as info:
        migrate(sense, BASE.replace("    value: float\n", "") + "    value: float | None = None\n    gone: int | None = None\n")
    assert "table old_events" in str(info.value)
    with pytest.raises(MigrationError) as info:
        migrate(sense, '@table(pk="ts")\nclass Sample:\n    ts: int\n')
    assert "table old_events" in str(info.value) and "table sample: column value" in str(info.value)
    path = migrate(sense, BASE, allow_data_loss=True)
    assert path.name == "0002_drop_old_events.sql"
    conn = open_db(sense)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'old_events'").fetchone() is None


def test_engine_and_unmanaged_underscore_tables_are_never_touched(sense):
    migrate(sense, BASE)
    (sense / "migrations" / "0002_private.sql").write_text("CREATE TABLE _cache (k TEXT);\n")
    assert generate_migration(sense) is None
    path = migrate(sense, BASE + "    unit: str | None = None\n")
    assert "_cache" not in path.read_text() and "_signals" not in path.read_text()


def test_string_defaults_survive_generation_quoted(sense):
    migrate(sense, BASE + '    a: str = "foo (bar)"\n    b: str = "null"\n    c: str = "CURRENT_TIMESTAMP"\n    d: bool = False\n')
    conn = open_db(sense)
    conn.execute("INSERT INTO sample (ts, value) VALUES (1, 1.0)")
    assert conn.execute("SELECT a, b, c, d FROM sample").fetchone() == ("foo (bar)", "null", "CURRENT_TIMESTAMP", 0)
    assert generate_migration(sense) is None


def test_optional_is_nullable_and_plain_is_not_null(sense):
    migrate(sense, BASE + "    unit: str | None = None\n")
    conn = open_db(sense)
    conn.execute("INSERT INTO sample (ts, value, unit) VALUES (1, 1.0, NULL)")
    with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
        conn.execute("INSERT INTO sample (ts, value) VALUES (2, NULL)")


def test_rebuilding_the_db_from_generated_migrations_gives_the_same_schema(sense):
    migrate(sense, BASE + "    unit: str | None = None\n")
    migrate(sense, BASE + "    unit: int | None = None\n")
    migrate(sense, BASE + "    unit: int | None = None\n" + '\n@table(indexes=["x"])\nclass Other:\n    x: int\n')
    conn = open_db(sense)
    before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    conn.close()
    (sense.parent.parent / "demo.db").unlink()
    assert open_db(sense).execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == before


def test_schema_syntax_error_names_file_and_line(sense):
    (sense / "schema.py").write_text(PRELUDE + "@table()\nclass Broken:\n    x: int =\n")
    with pytest.raises(SenseError, match=r"schema.py:5: "):
        generate_migration(sense)
    (sense / "schema.py").write_text(PRELUDE + "\nraise RuntimeError('boom')\n")
    with pytest.raises(SenseError, match=r"schema.py:4: RuntimeError: boom"):
        generate_migration(sense)


def test_verification_refuses_sql_that_misses_schema(sense):
    write_schema(sense, BASE)
    with pytest.raises(RuntimeError, match="internal error.*misses schema.py"):
        _verify(sense, "CREATE TABLE sample (ts INTEGER PRIMARY KEY, value TEXT);", load_specs(sense))


def test_name_overrides_the_slug(sense):
    migrate(sense, BASE)
    path = migrate(sense, BASE + "    unit: str | None = None\n", name="Units please")
    assert path.name == "0002_units_please.sql"


def test_text_and_composite_primary_keys_refuse_null(sense):
    migrate(sense, """
    @table(pk="key")
    class Item:
        key: str
        value: int

    @table(pk=("a", "b"))
    class Pair:
        a: str
        b: int
    """)
    conn = open_db(sense)
    assert columns(conn, "item")["key"][1] == 1 and columns(conn, "pair")["a"][1] == 1
    for sql in ("INSERT INTO item (key, value) VALUES (NULL, 1)", "INSERT INTO pair (a, b) VALUES (NULL, 1)"):
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(sql)


def test_a_lone_integer_primary_key_stays_the_rowid(sense):
    migrate(sense, BASE)
    conn = open_db(sense)
    conn.execute("INSERT INTO sample (ts, value) VALUES (NULL, 1.0)")  # NULL asks SQLite for the next rowid
    assert conn.execute("SELECT ts FROM sample").fetchone()[0] == 1
