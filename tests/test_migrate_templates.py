"""The example senses shipped in templates/instance keep schema.py and migrations/ in sync."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from nerve_cli.schema.migrate import apply_migrations, generate_migration

TEMPLATE_SENSES = Path(__file__).resolve().parent.parent / "templates" / "instance" / "senses"
SENSES = sorted(p.name for p in TEMPLATE_SENSES.glob("*") if (p / "schema.py").is_file())


def test_there_are_example_senses():
    assert {"cpu-percent", "disk-usage", "memory-usage"} <= set(SENSES)


@pytest.mark.parametrize("name", SENSES)
def test_shipped_migrations_match_schema(tmp_path, name):
    copy = tmp_path / "senses" / name
    shutil.copytree(TEMPLATE_SENSES / name, copy)
    assert (copy / "migrations" / "0001_init.sql").is_file(), f"run: nerve sense migrate on templates/instance/senses/{name}"
    assert generate_migration(copy) is None, f"templates/instance/senses/{name}/schema.py changed: regenerate its migrations"
    assert not list((copy / "migrations").glob("0002_*")), "a file was written"
    conn = sqlite3.connect(tmp_path / f"{name}.db")
    assert apply_migrations(conn, copy / "migrations")
