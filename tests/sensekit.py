"""Helpers for sense runtime tests: write a small instance by hand and talk to a real worker."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import yaml

from nerve_cli.ops.senses.worker_client import SenseWorkerClient

SAMPLE_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="ts", time="ts")
class Sample:
    ts: int
    value: float
"""
SAMPLE_SQL = "CREATE TABLE sample (ts INTEGER PRIMARY KEY, value REAL NOT NULL);\n"


def write_sense(home: Path, name: str, code: str, *, schema: str | None = SAMPLE_SCHEMA,
                migration: str | None = SAMPLE_SQL) -> Path:
    folder = home / "senses" / name
    (folder / "migrations").mkdir(parents=True, exist_ok=True)
    (folder / "sense.py").write_text(textwrap.dedent(code).lstrip())
    if schema is not None:
        (folder / "schema.py").write_text(textwrap.dedent(schema).lstrip())
    if migration is not None:
        (folder / "migrations" / "0001_init.sql").write_text(migration)
    return folder


def write_instance(home: Path, senses: dict[str, dict[str, Any]], *, reflexes: list[dict] | None = None,
                   engine: dict | None = None) -> Path:
    """senses: name -> {"code": ..., optional "schema", "migration", and nerve.yaml settings}."""
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"senses": {}}
    for name, spec in senses.items():
        spec = dict(spec)
        code = spec.pop("code")
        extras = {k: spec.pop(k) for k in ("schema", "migration") if k in spec}
        write_sense(home, name, code, **extras)
        config["senses"][name] = spec
    if reflexes:
        config["reflexes"] = reflexes
    if engine:
        config["engine"] = engine
    (home / "nerve.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return home


def worker(home: Path, group: str = "default", senses: list[str] | None = None, *, stderr: Any = None) -> SenseWorkerClient:
    client = SenseWorkerClient(home, group, senses, stderr=stderr)
    client.start()
    return client


def db_rows(home: Path, name: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Read a sense db from outside, read-only, the way another process would."""
    path = home / "data" / "senses" / f"{name}.db"
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
