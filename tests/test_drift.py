"""Schema drift (schema.py edited, `nerve sense migrate` forgotten) is caught everywhere it matters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from enginekit import RunningEngine, errors, last_signal, nerve, wait_for, write_instance
from sensekit import SAMPLE_SCHEMA, SAMPLE_SQL

CONFIG = """
    senses:
      reading: {}
    reflexes:
      - {sense: reading, interval: 200ms}
"""
INSERTS = """
    import time
    from .schema import Sample

    def compute(db, peers):
        db.insert(Sample(ts=time.time_ns(), value=1.0))
        return "ok"
"""
WITH_TITLE = SAMPLE_SCHEMA + "    title: str | None = None\n"
INSERTS_TITLE = INSERTS.replace("value=1.0)", "value=1.0, title='t')").replace('"ok"', '"titled"')


def instance(home: Path, code: str = INSERTS) -> Path:
    write_instance(home, CONFIG, {"reading": code}, {"reading": SAMPLE_SCHEMA})
    (home / "senses/reading/migrations/0001_init.sql").write_text(SAMPLE_SQL)
    return home


def add_title(home: Path) -> None:
    (home / "senses/reading/schema.py").write_text(textwrap.dedent(WITH_TITLE))
    (home / "senses/reading/sense.py").write_text(textwrap.dedent(INSERTS_TITLE))


def test_config_check_catches_drift_with_file_line_and_the_command(home: Path) -> None:
    instance(home)
    assert nerve("config", "check", home=home).returncode == 0
    add_title(home)
    result = nerve("config", "check", home=home)
    assert result.returncode == 1, result.stdout
    assert "senses/reading/schema.py:8: error: senses.reading:" in result.stdout  # the class line
    assert "column sample.title is in schema.py but not in the migrations" in result.stdout
    assert "run `nerve sense migrate reading`" in result.stdout
    data = json.loads(nerve("config", "check", "--json", home=home).stdout)
    assert data["valid"] is False and data["problems"][0]["file"] == "senses/reading/schema.py"
    assert nerve("config", "check", "--fast", home=home).returncode == 0  # --fast does not import code
    show = nerve("sense", "show", "reading", home=home)
    assert "would not load: senses/reading/schema.py:8:" in show.stdout and "nerve sense migrate reading" in show.stdout
    assert nerve("sense", "migrate", "reading", home=home).returncode == 0
    assert nerve("config", "check", home=home).returncode == 0


def test_doctor_reports_drift_and_exits_1(home: Path) -> None:
    instance(home)
    assert nerve("doctor", home=home).returncode == 0
    add_title(home)
    result = nerve("doctor", home=home)
    assert result.returncode == 1
    assert "schema.py and its migrations disagree" in result.stdout and "nerve sense migrate reading" in result.stdout


def test_engine_refuses_a_drifted_sense_at_load_instead_of_failing_every_compute(home: Path) -> None:
    instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: last_signal(home, "reading") == "ok", 10, what="the first signal")
        add_title(home)
        refused = wait_for(lambda: [e["payload"] for e in errors(home, "reading")
                                    if e["payload"].get("error_type") == "SchemaDrift"], 10, what="the refusal")[0]
        assert "run `nerve sense migrate reading`" in refused["message"]
        assert refused["file"] == "senses/reading/schema.py" and refused["line"] == 8
        assert nerve("sense", "migrate", "reading", home=home).returncode == 0
        wait_for(lambda: last_signal(home, "reading") == "titled", 15, what="the migrated sense to run")
        engine.stop()
    assert not [e for e in errors(home, "reading") if "has no column named" in e["payload"]["message"]]


def test_sql_error_naming_a_missing_column_carries_the_migrate_hint(home: Path) -> None:
    code = """
        def compute(db, peers):
            db.execute("INSERT INTO sample (ts, value, title) VALUES (1, 2.0, 'x')")
            return 1
    """
    instance(home, code)
    result = nerve("sense", "compute", "reading", "--json", home=home)
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert "has no column named title" in error["message"]
    assert "run `nerve sense migrate reading`" in error["message"]
    assert error["file"] == "senses/reading/sense.py" and error["line"] == 3
