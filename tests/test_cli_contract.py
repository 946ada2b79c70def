"""The --json contract: every document of every command validates against its shipped JSON Schema.

One populated instance (signals and threads both live and archived), read with
the engine stopped and then running. A field renamed or retyped fails here
(contractkit closes the schemas for our own output: unknown fields refused,
every known one required), as does one that breaks the schemas first
published for version 1; the naming rule for time is checked on every
document besides.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import contractkit as contract
import pytest
from contractkit import naming_problems
from enginekit import RunningEngine, write_instance
from typer.testing import CliRunner
from workflow_support import PINGPONG

from nerve_cli.cli import output
from nerve_cli.cli.app import app
from nerve_cli.contract.schema import CLI_KINDS
from nerve_cli.store.archive import archive

CONFIG = """
senses:
  a: {group: one}
  b: {group: two}
reflexes:
  - {sense: a, interval: 1h}
  - {sense: b, on: [a, task.created]}
workflows:
  x: {}
  g: {}
"""
GATE = """
from nerve_cli.sdk import END, PERSON, WorkflowDefinition, ask_person

async def asker(messages):
    return ask_person("ok?")

workflow = WorkflowDefinition(roles={"asker": asker},
                              moderator=lambda m: END if m[-1].role == PERSON else "asker")
"""
SENSES = {
    "a": "def compute(db, peers):\n    return {'n': len(db.query('select * from _signals')) + 1}\n",
    "b": "def compute(db, peers):\n    return 'text'\n",
}
class Checked(contract.Checked):
    """Documents from the CLI, in process (CliRunner) or as a subprocess."""

    def cli(self, kind: str, *args: str, code: int = 0) -> Any:
        output.reset()
        result = CliRunner().invoke(app, [*args])
        assert result.exit_code == code, (args, result.exit_code, result.output)
        if kind in ("log", "workflow-run"):
            return [self.doc(kind, json.loads(line), " ".join(args)) for line in result.stdout.splitlines()]
        return self.doc(kind, _as_json_wrote_it(result.stdout), " ".join(args))

    def proc(self, kind: str, home: Path, *args: str, code: int = 0) -> Any:
        env = {**os.environ, "NERVE_HOME": str(home), "NO_COLOR": "1"}
        done = subprocess.run([sys.executable, "-m", "nerve_cli", *args], capture_output=True, text=True,
                              env=env, timeout=60)
        assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
        if kind in ("log", "workflow-run"):
            return [self.doc(kind, json.loads(line), " ".join(args)) for line in done.stdout.splitlines()]
        return self.doc(kind, _as_json_wrote_it(done.stdout), " ".join(args))


def _as_json_wrote_it(text: str) -> Any:
    """The document, after checking its text is byte for byte what stdlib json wrote before orjson did."""
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return doc


@pytest.fixture
def populated(home: Path) -> Path:
    """Senses and a thread archived (as if two days had passed), then more of both, live."""
    write_instance(home, CONFIG, SENSES)
    (home / "workflows").mkdir()
    (home / "workflows" / "x.py").write_text(PINGPONG)
    (home / "workflows" / "g.py").write_text(GATE)
    check = Checked()
    for sense in ("a", "a", "b"):
        check.proc("sense-compute", home, "sense", "compute", sense, "--json")
    lines = check.proc("workflow-run", home, "workflow", "run", "x", "--prompt", "id=old rounds=2", "--json")
    assert [line["event"] for line in lines] == ["round", "round", "outcome"]
    assert lines[-1]["status"] == "completed" and lines[-1]["rounds"] == 2
    _age(home, days=40)
    report = archive(home, older_than_s=30 * 86400)
    assert report.ok and report.rows > 0
    check.proc("sense-compute", home, "sense", "compute", "a", "--json")
    check.proc("workflow-run", home, "workflow", "run", "x", "--prompt", "id=new rounds=1", "--json")
    return home


def _age(home: Path, days: int) -> None:
    """Move every stored time back by `days`, as if these rows had been written then."""
    shift = days * 86_400_000
    with sqlite3.connect(home / "data" / "logs.db") as conn:
        conn.execute("UPDATE logs SET ts = ts - ?", (shift,))
        conn.execute("UPDATE workflow_runs SET ts = ts - ?", (shift,))
    for db in (home / "data" / "senses").glob("*.db"):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE _signals SET ts = ts - ?", (shift,))


def test_every_document_matches_its_schema_engine_stopped_and_running(populated: Path) -> None:
    home, check = populated, Checked()
    # engine stopped
    stopped = check.cli("status", "status", "--json", code=3)  # the stopped view, read from the files
    assert stopped["engine"]["running"] is False and stopped["workers"] == []
    listed = {s["name"]: s for s in check.cli("sense-list", "sense", "list", "--json")["senses"]}
    shown = check.cli("sense-show", "sense", "show", "a", "--json")
    assert listed["a"]["signal_count"] == shown["signal_count"] == len(shown["signals"]) == 3  # 2 archived + 1 live
    assert [s["payload"] for s in shown["signals"]] == [{"n": 1}, {"n": 2}, {"n": 1}]  # archived ones decoded too
    assert next(t for t in shown["tables"] if t["name"] == "_signals") == {
        "name": "_signals", "rows": 1, "archived_rows": 2, "engine": True, "time_column": None, "newest": []}  # newest: own tables only
    check.cli("sense-show", "sense", "show", "b", "-n", "0", "--json")
    chart = check.cli("sense-chart", "sense", "show", "a", "--chart", "--column", "n", "--json")
    assert (chart["archived"], chart["live"]) == (2, 1)
    check.cli("lifecycle", "sense", "disable", "a", "--dry-run", "--json")
    check.cli("lifecycle", "sense", "enable", "a", "--dry-run", "--json")
    check.cli("lifecycle", "workflow", "disable", "x", "--json")
    check.cli("lifecycle", "workflow", "enable", "x", "--json")
    assert check.cli("workflow-list", "workflow", "list", "--json")["workflows"][0]["threads"] == {"completed": 2}
    threads = {t["run_id"]: t for t in check.cli("thread-list", "thread", "list", "--json")["threads"]}
    old = check.cli("thread-show", "thread", "show", "run-1", "--json")  # archived
    check.cli("thread-show", "thread", "show", "run-2", "--json")  # live
    assert threads["run-1"]["rounds"] == old["rounds"] == 2 and threads["run-1"]["prompt"] == old["prompt"]
    assert len(check.cli("log", "logs", "--json", "-n", "1000")) > 0
    everything = check.cli("log", "logs", "--json", "--since", "60d", "--until", "now", "-n", "1000")
    assert len(everything) > len(check.cli("log", "logs", "--json", "-n", "1000"))  # archived days too
    signals = check.cli("log", "logs", "--signals", "--ref", "a", "--since", "60d", "--json", "-n", "1000")
    assert [r["payload"] for r in signals] == [{"n": 1}, {"n": 2}, {"n": 1}]  # archived signals too
    assert all(r["id"] is None and r["signal_id"] for r in signals)
    check.cli("log", "logs", "--prints", "--json")
    assert check.cli("config-check", "config", "check", "--json")["valid"] is True
    assert check.cli("workflow-check", "workflow", "check", "--json")["valid"] is True
    check.cli("doctor", "doctor", "--json")
    check.cli("mesh", "mesh", "--json")
    check.cli("mesh", "mesh", "--format", "json")
    check.cli("archive", "archive", "--dry-run", "--json")
    copy = check.cli("backup", "backup", str(home.parent / "copy"), "--json")
    assert {d["path"] for d in copy["databases"]} == {"data/logs.db", "data/senses/a.db", "data/senses/b.db"}
    assert "is a sense" in check.cli("error", "emit", "a", "--json", code=1)["error"]["message"]
    offline = check.cli("emit", "emit", "task.created", '{"id": 1}', "--json")  # no engine: stored for the next start
    assert (offline["delivered"], offline["listeners"], offline["triggered"]) == ("at next start", ["b"], [])
    assert check.cli("error", "sense", "show", "nope", "--json", code=1)["error"]["type"] == "sense_error"
    assert check.cli("error", "logs", "--since", "yesterday", "--json", code=2)["error"]["type"] == "usage"
    # engine running
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        status = check.cli("status", "status", "--json")
        assert {s["name"] for s in status["senses"]} >= {"a", "b", "nerve-health"}
        assert status["channels"] == [{"name": "task.created"}]
        assert check.cli("emit", "emit", "task.created", "--json")["triggered"] == ["b"]
        replay = check.cli("replay", "sense", "replay", "b", "--source", "task.created", "--from", "0", "--dry-run",
                           "--json")
        assert (replay["kind"], replay["delivered"]) == ("channel", None) and replay["events"] >= 1
        assert check.cli("sense-dry-run", "sense", "compute", "b", "--dry-run", "--event", "task.created=1",
                         "--json")["events"] == 0  # its compute takes no trigger: samples are not given to it
        assert check.proc("sense-compute", home, "sense", "compute", "a", "--json")["via"] == "engine"
        lines = check.proc("workflow-run", home, "workflow", "run", "x", "--prompt", "rounds=1", "--json")
        assert lines[-1]["via"] == "engine" and lines[-1]["status"] == "completed"
        check.cli("sense-list", "sense", "list", "--json")
        check.cli("sense-show", "sense", "show", "a", "--json")
        check.cli("thread-list", "thread", "list", "--json")
        check.cli("log", "logs", "--json")
        waits = check.proc("workflow-run", home, "workflow", "run", "g", "--prompt", "q", "--json", code=5)
        assert waits[-1]["status"] == "waiting"
        asked = check.cli("thread-show", "thread", "show", waits[-1]["run_id"], "--json")
        assert asked["question"] == "ok?" and asked["waiting_since_ms"] is not None
        answer = check.cli("thread-answer", "thread", "approve", waits[-1]["run_id"], "--json")
        assert (answer["decision"], answer["via"]) == ("approve", "engine")
        rerun = check.cli("thread-rerun", "thread", "rerun", waits[-1]["run_id"], "--from-round", "0", "--json")
        assert rerun["rerun_of"] == waits[-1]["run_id"]
        assert check.cli("sense-pause", "sense", "resume", "--group", "two", "--json")["via"] == "engine"
        assert check.cli("thread-pause", "thread", "pause", rerun["run_id"], "--json")["status"] in ("paused", "pausing")
        check.cli("thread-cancel", "thread", "cancel", rerun["run_id"], "--json")
        code, _ = engine.stop()
        assert code == 0
    check.cli("service", "service", "status", "--platform", "linux", "--json")
    check.cli("deps", "deps", "--json")
    assert check.cli("rename", "sense", "rename", "b", "bee", "--json")["moved"][0] == {
        "from": "senses/b", "to": "senses/bee"}
    check.cli("delete", "sense", "delete", "bee", "--dry-run", "--json")
    check.cli("delete", "workflow", "delete", "x", "--json")
    check.cli("gc", "gc", "--dry-run", "--json")
    made = check.cli("sense-new", "sense", "new", "fresh", "--on", "task.created", "--disabled", "--json")
    assert (made["enabled"], made["reflex"], made["migration"]) == (False, {"on": ["task.created"]},
                                                                    "senses/fresh/migrations/0001_init.sql")
    assert check.cli("migrate", "sense", "migrate", "fresh", "--json")["senses"][0]["file"] is None  # up to date
    # sense-compute and workflow-run are checked above (as subprocesses); fleet in test_fleet.py, with a nats-server
    # thread-link in test_links.py (it needs the engine's HTTP listener); agents' documents in test_agents.py
    skipped = {"sense-compute", "workflow-run", "fleet", "thread-link", "agent-ack", "agent-delivery", "agent-install",
               "agent-list"}
    assert check.kinds >= set(CLI_KINDS) - skipped, set(CLI_KINDS) - check.kinds


def test_a_document_is_valid_json_whatever_it_holds() -> None:
    """orjson writes the documents (cli/output.json_document): NaN and infinity are null, where json wrote the
    invalid `NaN`; what orjson refuses (an integer past 64 bits, a lone surrogate, deep nesting) is written by
    json as before; other values are written as json did, non-ASCII text unescaped."""
    def strict(text: str) -> Any:
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))

    assert strict(output.json_document({"lag": float("nan"), "max": float("inf")})) == {"lag": None, "max": None}
    deep: list = []
    inner = deep
    for _ in range(300):
        inner.append([])
        inner = inner[0]
    for value in ({"id": 2**70}, {"text": "a\ud800b"}, {"deep": deep}, {"path": Path("/x"), 1: "é—→", "e": []}):
        assert output.json_document(value) == json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n"


def test_naming_rule_check_catches_the_old_shapes() -> None:
    assert naming_problems({"ts": 1, "time": "2026-01-01T00:00:00.000Z"})
    assert naming_problems({"started_at": 1.5})
    assert naming_problems({"last_signal_ms": 5})
    assert naming_problems({"x_ms": 5, "x": "yesterday"})
    assert not naming_problems({"x_ms": None, "x": None, "payload": {"ts": 1}})


def test_an_invalid_nerve_yaml_gives_documents_that_match_their_schemas(home: Path) -> None:
    write_instance(home, "senses:\n  a: {throttle: 5}\n  b: {timeout: x}\n", {})
    check = Checked()
    failed = check.cli("error", "sense", "list", "--json", code=1)["error"]
    assert failed["type"] == "config_error" and [p["path"] for p in failed["problems"]] == [
        "senses.a.throttle", "senses.b.timeout"]
    assert all(p["file"] == "nerve.yaml" and p["line"] for p in failed["problems"])
    report = check.cli("config-check", "config", "check", "--json", code=1)
    assert report["valid"] is False and report["problems"][:2] == failed["problems"]
