"""`nerve sense new / compute / list / show` on a real instance (nerve init, real git, real workers)."""

from __future__ import annotations

import json
import sqlite3

import git
import pytest
from conftest import cli

from nerve_cli.instance.scaffold import create_instance


@pytest.fixture
def inst(home):
    create_instance(home)
    return home



def _head(home) -> str:
    return git.Repo(home).head.commit.hexsha


def test_sense_new_scaffolds_migrates_registers_and_commits(inst) -> None:
    config = inst / "nerve.yaml"
    config.write_text(config.read_text().replace("senses:\n", "senses:  # my own note\n", 1))
    git.Repo(inst).index.add(["nerve.yaml"])
    git.Repo(inst).index.commit("my note")

    result = cli("sense", "new", "open-prs", "--group", "github")
    assert result.exit_code == 0, result.output
    folder = inst / "senses" / "open-prs"
    assert (folder / "schema.py").is_file() and (folder / "sense.py").is_file()
    assert "open-prs" in (folder / "sense.py").read_text() and "{{name}}" not in (folder / "sense.py").read_text()
    migration = folder / "migrations" / "0001_init.sql"
    assert "CREATE TABLE" in migration.read_text() and "reading" in migration.read_text()
    text = config.read_text()
    assert "senses:  # my own note" in text and "# Reflexes: when each sense runs." in text
    from nerve_cli.config.load import load_config

    loaded = load_config(inst)
    assert loaded.senses["open-prs"].group == "github"
    assert any(r.sense == "open-prs" and r.interval == 60.0 for r in loaded.reflexes)
    repo = git.Repo(inst)
    assert repo.head.commit.message.strip() == "nerve: sense new open-prs"
    assert set(repo.head.commit.stats.files) == {
        "nerve.yaml", "senses/open-prs/schema.py", "senses/open-prs/sense.py", "senses/open-prs/migrations/0001_init.sql"}
    assert not repo.is_dirty(untracked_files=True)
    assert "nerve sense compute open-prs" in result.output

    first = cli("sense", "compute", "open-prs", "--json")
    second = cli("sense", "compute", "open-prs", "--json")
    assert json.loads(first.output)["payload"] == {"count": 1}
    assert json.loads(second.output)["payload"] == {"count": 2}


@pytest.mark.parametrize("name, message", [
    ("Bad_Name", "invalid sense name"),
    ("../escape", "invalid sense name"),
    ("cpu-percent", "already exists in nerve.yaml"),
    ("nerve-health", "built-in"),
])
def test_sense_new_refuses(inst, name, message) -> None:
    before = _head(inst)
    result = cli("sense", "new", name)
    assert result.exit_code == 1 and message in result.output, result.output
    assert _head(inst) == before


def test_sense_new_refuses_a_folder_already_on_disk(inst) -> None:
    (inst / "senses" / "leftover").mkdir()
    result = cli("sense", "new", "leftover")
    assert result.exit_code == 1 and "already exists but is not in nerve.yaml" in result.output
    assert "leftover" not in (inst / "nerve.yaml").read_text()


def test_sense_new_needs_an_instance(home) -> None:
    result = cli("sense", "new", "x")
    assert result.exit_code == 1 and "nerve init" in result.output


def _custom(inst, name: str, code: str) -> None:
    folder = inst / "senses" / name
    (folder / "migrations").mkdir(parents=True)
    (folder / "schema.py").write_text("")
    (folder / "sense.py").write_text(code)
    from nerve_cli.config.edit import add_sense

    add_sense(inst, name, {"group": "custom"})


def test_sense_compute_outcomes_and_exit_codes(inst) -> None:
    _custom(inst, "quiet", "def compute(db, peers):\n    return None\n")
    _custom(inst, "broken", "def compute(db, peers):\n    x = 1\n    return x / 0\n")
    _custom(inst, "chatty", "def compute(db, peers):\n    print('noise')\n    return [1, 2]\n")

    signal = cli("sense", "compute", "chatty")
    assert signal.exit_code == 0 and "chatty: signal" in signal.stdout and "noise" not in signal.stdout
    assert "chatty | noise" in signal.stderr  # what the compute printed, under its name, on stderr
    data = json.loads(cli("sense", "compute", "chatty", "--json").output)
    assert data["output"] == [{"stream": "stdout", "text": "noise"}] and data["via"] == "worker"
    silent = cli("sense", "compute", "quiet")
    assert silent.exit_code == 0 and "silent" in silent.output
    broken = cli("sense", "compute", "broken")
    assert broken.exit_code == 1
    assert "ZeroDivisionError" in broken.output and "senses/broken/sense.py:3" in broken.output
    assert "return x / 0" in broken.output  # the user's traceback

    data = json.loads(cli("sense", "compute", "broken", "--json").output)
    assert set(data) == {"version", "sense", "outcome", "via", "payload", "workflow", "thread", "events", "time_ms", "time",
                         "duration_s", "error", "output"}
    assert data["outcome"] == "error" and data["error"]["line"] == 3 and data["error"]["file"] == "senses/broken/sense.py"
    data = json.loads(cli("sense", "compute", "quiet", "--json").output)
    assert data["outcome"] == "silent" and data["payload"] is None and data["error"] is None

    missing = cli("sense", "compute", "nope")
    assert missing.exit_code == 1 and "no sense `nope`" in missing.output


def test_standalone_compute_is_recorded_in_logs(inst) -> None:
    _custom(inst, "broken", "def compute(db, peers):\n    raise ValueError('bad input')\n")
    cli("sense", "compute", "broken")
    conn = sqlite3.connect(inst / "data" / "logs.db")
    rows = conn.execute("SELECT source, type, ref_id, payload FROM logs ORDER BY id").fetchall()
    meta = conn.execute("SELECT key FROM meta").fetchall()
    conn.close()
    assert [(s, t, r) for s, t, r, _ in rows] == [
        ("reflex", "run_start", "broken"), ("system", "error", "broken"), ("reflex", "run_complete", "broken")]
    assert json.loads(rows[1][3])["message"] == "bad input" and json.loads(rows[2][3])["outcome"] == "error"
    assert ("last_complete:broken",) in meta


def test_sense_compute_of_a_sense_that_fails_to_load(inst) -> None:
    _custom(inst, "typo", "def compute(db, peers)\n    return 1\n")
    result = cli("sense", "compute", "typo")
    assert result.exit_code == 1 and "SyntaxError" in result.output and "senses/typo/sense.py:1" in result.output
    assert "worker group=" not in result.stderr  # the worker's log line would repeat the error
    assert "importlib" not in result.stderr and "Traceback" not in result.stderr


def test_sense_list(inst) -> None:
    _custom(inst, "counter", "def compute(db, peers):\n    return 7\n")
    cli("sense", "compute", "counter")
    cli("sense", "compute", "counter")
    data = {s["name"]: s for s in json.loads(cli("sense", "list", "--json").output)["senses"]}
    assert set(data) >= {"cpu-percent", "memory-usage", "disk-usage", "counter"}
    assert data["counter"]["signal_count"] == 2 and data["counter"]["last_signal_ms"] > 0
    assert data["counter"]["triggers"] == [] and data["counter"]["group"] == "custom"
    assert data["cpu-percent"]["signal_count"] == 0 and data["cpu-percent"]["last_signal_ms"] is None
    assert data["cpu-percent"]["triggers"] == ["every 10s"]
    table = cli("sense", "list")
    assert table.exit_code == 0
    line = next(line for line in table.output.splitlines() if "counter" in line)
    assert "on demand" in line and "Z\t2" in line  # piped: the last signal's time in RFC 3339 UTC, not "5s ago"
    drawn = cli("sense", "list", "--format", "table")
    assert "ago" in next(line for line in drawn.output.splitlines() if "counter" in line)
    assert "never" in next(line for line in table.output.splitlines() if "cpu-percent" in line)


def test_sense_show(inst) -> None:
    code = "_n = [0]\n\ndef compute(db, peers):\n    _n[0] += 1\n    return len(db.query('select * from _signals')) * 10\n"
    _custom(inst, "numbers", code)
    for _ in range(4):
        cli("sense", "compute", "numbers")
    data = json.loads(cli("sense", "show", "numbers", "-n", "3", "--json").output)
    assert [s["payload"] for s in data["signals"]] == [10, 20, 30]
    assert {"name": "_signals", "rows": 4, "archived_rows": 0, "engine": True, "time_column": None, "newest": []} in data["tables"]
    assert data["config"]["group"] == "custom" and data["signal_count"] == 4
    text = cli("sense", "show", "numbers", "-n", "4").output
    assert "▁▃▆█" in text and "Last 4 signals" in text
    assert "_signals" not in text and "_migrations" not in text  # Nerve's own tables are not the sense's
    assert "no tables of its own" in text
    one = cli("sense", "show", "numbers", "-n", "1").output
    assert "Last 1 signal\n" in one and "4 signals (archived ones included)" in one

    cli("sense", "compute", "disk-usage")
    cli("sense", "compute", "disk-usage")
    rows = cli("sense", "show", "disk-usage", "--rows", "1")
    assert "sample: 2 rows, newest 1" in rows.output and "percent" in rows.output  # its own rows, shown
    data = json.loads(cli("sense", "show", "disk-usage", "--json").output)
    sample = next(t for t in data["tables"] if t["name"] == "sample")
    assert len(sample["newest"]) == 2 and sample["newest"][0]["ts"] > sample["newest"][1]["ts"]  # newest first
    assert data["load_problem"] is None

    fresh = cli("sense", "show", "memory-usage")
    assert fresh.exit_code == 0 and "has not run" in fresh.output
    missing = cli("sense", "show", "disk-usagee")
    assert missing.exit_code == 1 and "disk-usage" in missing.output


def test_sense_show_non_numeric_payloads_have_no_sparkline(inst) -> None:
    _custom(inst, "words", "def compute(db, peers):\n    return 'hello'\n")
    cli("sense", "compute", "words")
    cli("sense", "compute", "words")
    text = cli("sense", "show", "words").output
    assert '"hello"' in text and not any(ch in text for ch in "▁▂▃▄▅▆▇█")


def test_standalone_compute_timeout_then_grace_kill(inst) -> None:
    import time

    from nerve_cli.config.edit import add_sense

    folder = inst / "senses" / "spin"
    (folder / "migrations").mkdir(parents=True)
    (folder / "schema.py").write_text("")
    (folder / "sense.py").write_text("def compute(db, peers):\n    while True:\n        pass\n")
    add_sense(inst, "spin", {"group": "spin", "timeout": "300ms", "grace_period": "300ms"})
    start = time.monotonic()
    result = cli("sense", "compute", "spin", "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["error"]["type"] == "TimeoutError" and "worker was killed" in data["error"]["message"]
    assert time.monotonic() - start < 5


def test_sense_compute_without_an_engine_hands_the_worker_its_settings(inst) -> None:
    """The CLI has read nerve.yaml: its one-off worker is not made to read it again (pydantic, ruamel)."""
    _custom(inst, "looker", "import sys\n\ndef compute(db, peers):\n"
                            "    return sorted(m for m in ('pydantic', 'ruamel') if m in sys.modules)\n")
    data = json.loads(cli("sense", "compute", "looker", "--json").output)
    assert data["via"] == "worker" and data["payload"] == []
