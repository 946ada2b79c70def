"""`nerve sense migrate`: writes the next file per sense, says when up to date, commits, fails with exit 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nerve_cli.cli import output
from nerve_cli.cli.app import app

SCHEMA = (
    "from __future__ import annotations\nfrom nerve_cli.sdk import table\n\n"
    '@table(pk="ts", time="ts")\nclass Sample:\n    ts: int\n    value: float\n'
)


def git(home: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(home), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def instance(home: Path) -> Path:
    (home / "senses").mkdir(parents=True)
    (home / "nerve.yaml").write_text("senses: {}\n")
    for name in ("alpha", "beta"):
        (home / "senses" / name).mkdir()
        (home / "senses" / name / "schema.py").write_text(SCHEMA)
    git(home, "init", "-q")
    return home


def run(*args: str):
    output.reset()
    result = CliRunner().invoke(app, ["sense", "migrate", *args])
    output.reset()
    return result


def test_migrate_one_sense_writes_and_commits(instance):
    pytest.importorskip("nerve_cli.instance.git")
    result = run("alpha")
    assert result.exit_code == 0, result.output
    assert "senses/alpha/migrations/0001_init.sql written (1 statement: create table sample)" in result.output
    assert (instance / "senses/alpha/migrations/0001_init.sql").is_file()
    assert not (instance / "senses/beta/migrations").exists()
    assert git(instance, "log", "--format=%s").strip() == "nerve: sense migrate alpha (0001_init.sql)"
    assert git(instance, "show", "--name-only", "--format=").split() == ["senses/alpha/migrations/0001_init.sql", "senses/alpha/schema.py"]
    result = run("alpha")
    assert result.exit_code == 0 and "alpha: up to date" in result.output


def test_migrate_all_and_a_change(instance):
    pytest.importorskip("nerve_cli.instance.git")
    assert run("--all").exit_code == 0
    (instance / "senses/beta/schema.py").write_text(SCHEMA + "    unit: str | None = None\n")
    result = run("--all")
    assert result.exit_code == 0, result.output
    assert "alpha: up to date" in result.output
    assert "senses/beta/migrations/0002_add_unit.sql written (1 statement: add column sample.unit)" in result.output
    assert "nerve: sense migrate beta (0002_add_unit.sql)" in git(instance, "log", "--format=%s")


def _rows(instance: Path, sense: str, rows: int) -> None:
    """The sense's database as its engine made it, holding `rows` samples."""
    import sqlite3

    (instance / "data" / "senses").mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(instance / "data" / "senses" / f"{sense}.db")
    conn.execute("CREATE TABLE IF NOT EXISTS sample (ts INTEGER PRIMARY KEY, value FLOAT NOT NULL)")
    conn.executemany("INSERT INTO sample VALUES (?, ?)", [(i, 0.5) for i in range(rows)])
    conn.commit()
    conn.close()


def test_data_loss_refused_with_exit_1_then_allowed(instance):
    pytest.importorskip("nerve_cli.instance.git")
    assert run("alpha").exit_code == 0
    _rows(instance, "alpha", 3)
    (instance / "senses/alpha/schema.py").write_text(SCHEMA.replace("    value: float\n", ""))
    result = run("alpha")
    assert result.exit_code == 1
    assert "table sample: column value" in result.output and "--allow-data-loss" in result.output
    result = run("alpha", "--allow-data-loss")
    assert result.exit_code == 0, result.output
    assert "0002_drop_value.sql written" in result.output


def test_schema_syntax_error_exits_1_with_file_and_line(instance):
    (instance / "senses/alpha/schema.py").write_text("x = (\n")
    result = run("alpha")
    assert result.exit_code == 1
    assert "senses/alpha/schema.py:1" in result.output


def test_all_reports_each_failure_and_still_migrates_the_others(instance):
    pytest.importorskip("nerve_cli.instance.git")
    (instance / "senses/alpha/schema.py").write_text("x = (\n")
    result = run("--all")
    assert result.exit_code == 1
    assert "alpha: " in result.output and "schema.py:1" in result.output
    assert "senses/beta/migrations/0001_init.sql written" in result.output
    assert "1 sense could not be migrated: alpha" in result.output


def test_unknown_sense_and_usage_errors(instance):
    result = run("nope")
    assert result.exit_code == 1 and "no sense 'nope'" in result.output
    assert run().exit_code == 2
    assert run("alpha", "--all").exit_code == 2
    assert run("../etc").exit_code == 1


def test_dropping_what_holds_no_rows_needs_no_allow(instance):
    """A fresh scaffold needed --allow-data-loss to replace its own empty example table."""
    pytest.importorskip("nerve_cli.instance.git")
    assert run("alpha").exit_code == 0 and run("beta").exit_code == 0
    for sense in ("alpha", "beta"):
        (instance / f"senses/{sense}/schema.py").write_text(SCHEMA.replace("class Sample", "class Reading"))
    _rows(instance, "beta", 0)  # a database that ran, with the table empty
    for sense in ("alpha", "beta"):  # alpha: no database at all
        result = run(sense)
        assert result.exit_code == 0, result.output
        assert "drop table sample" in result.output and "create table reading" in result.output
    _rows(instance, "alpha", 1)
    (instance / "senses/alpha/schema.py").write_text(SCHEMA)  # drops reading, which holds none: allowed
    assert run("alpha").exit_code == 0
