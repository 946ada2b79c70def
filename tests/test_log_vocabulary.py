"""The log's vocabulary is one list: every kind Nerve can write is in the docs' table and in the JSON
Schemas of the documents that carry it, and `nerve doctor` names rows of any other kind."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from conftest import cli
from workflow_support import PINGPONG, ended, make_instance, manager, wait_for

from nerve_cli.contract.schema import schema as load_schema
from nerve_cli.vocab.logrows import LogKind, LogSource

LOG_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "log.md"
WRITTEN = {(k.source.value, k.type) for k in LogKind}


def readme_table() -> set[tuple[str, str]]:
    section = LOG_PAGE.read_text(encoding="utf-8").split("# The log's vocabulary", 1)[1]
    return set(re.findall(r"^\| `(\w+)` \| `(\w+)` \|", section, re.M))


def enum(prop: dict) -> list:
    """The values a schema property names: `enum`, or the enum of its open form (anyOf [enum, string])."""
    if "enum" in prop:
        return prop["enum"]
    return next(p["enum"] for p in prop["anyOf"] if "enum" in p)


def test_every_kind_nerve_writes_is_in_the_readme_table_and_the_schemas() -> None:
    table = readme_table()
    assert table - WRITTEN == set(), f"docs/reference/log.md documents kinds Nerve never writes: {sorted(table - WRITTEN)}"
    assert WRITTEN - table == set(), f"kinds missing from docs/reference/log.md's vocabulary table: {sorted(WRITTEN - table)}"
    sources = [s.value for s in LogSource]
    types = {t for _, t in WRITTEN} | {"signal"}  # `nerve logs --signals` rows: source and type `signal`
    for kind, props in (("log", load_schema("log")["properties"]),
                        ("log-list", load_schema("log-list")["properties"]["logs"]["items"]["properties"])):
        assert enum(props["source"]) == sources, kind
        assert set(enum(props["type"])) == types, kind
    thread_events = enum(load_schema("thread-show")["properties"]["events"]["items"]["properties"]["type"])
    assert set(thread_events) == {t for s, t in WRITTEN if s == "workflow" and t != "message"}


def test_a_real_history_holds_only_documented_kinds_and_doctor_names_any_other(home: Path) -> None:
    import asyncio

    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1, "max_queue": 1}}})

    async def main() -> None:
        mgr, logs, _ = manager(home, config)
        for i in range(3):  # one runs, one is dropped from the queue by the next
            mgr.launch("x", f"rounds=2 sleep=0.05 id={i}", None, {})
        await wait_for(lambda: ended(logs, "run-1", "run-2", "run-3"))
        await mgr.stop(0.1)

    asyncio.run(main())
    conn = sqlite3.connect(home / "data/logs.db")
    written = set(conn.execute("SELECT DISTINCT source, type FROM logs"))
    assert written and written <= readme_table()
    clean = json.loads(cli("doctor", "--json").stdout)
    assert clean["unknown_kinds"] == []
    conn.executemany("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, ?, NULL, NULL, 1)",
                     [("system", "hand_written"), ("system", "hand_written"), ("workflow", "step_complete")])
    conn.commit()
    conn.close()
    doc = json.loads(cli("doctor", "--json").stdout)
    assert doc["unknown_kinds"] == [{"source": "system", "type": "hand_written", "rows": 2},
                                    {"source": "workflow", "type": "step_complete", "rows": 1}]
    shown = cli("doctor")
    assert shown.exit_code == 0 and "2 rows of source system, type hand_written" in shown.output
