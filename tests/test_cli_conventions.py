"""What scripts and shells rely on: JSON errors, completion, choices, --version, time input and display."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli
from enginekit import write_instance

import nerve_cli
from nerve_cli.cli.choices import LogSource, ThreadStatus
from nerve_cli.store.logs import STATUSES, LogStore

NERVE = Path(sys.executable).with_name("nerve")
CONFIG = """
senses:
  cpu-percent: {}
  cpu-temp: {}
  disk: {}
reflexes:
  - {sense: disk, on: [task.created, cpu-percent]}
workflows:
  review: {}
"""



def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(NERVE), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


@pytest.fixture
def inst(home: Path) -> Path:
    return write_instance(home, CONFIG, {"cpu-percent": "def compute(db, peers):\n    return 1\n"})


def test_json_errors_go_to_stdout_with_the_same_exit_codes(inst: Path) -> None:
    plain = run("sense", "show", "cpu-percen")
    assert plain.returncode == 1 and plain.stdout == "" and "did you mean" in plain.stderr
    missing = cli("sense", "show", "cpu-percen", "--json")
    assert missing.exit_code == 1 and "did you mean" in json.loads(missing.stdout)["error"]["message"]
    usage = cli("thread", "list", "--status", "broken", "--json")
    assert usage.exit_code == 2 and json.loads(usage.stdout)["error"]["type"] == "usage"
    nowhere = cli("sense", "list", "--json", "--home", str(inst / "nope"))
    assert nowhere.exit_code == 1 and json.loads(nowhere.stdout)["error"]["type"] == "instance_not_found"


def test_bad_config_with_json_lists_every_problem(inst: Path) -> None:
    (inst / "nerve.yaml").write_text("senses:\n  a: {throttle: 5}\n  b: {timeout: x}\n")
    result = cli("sense", "list", "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "config_error" and len(error["problems"]) == 2
    assert {p["path"] for p in error["problems"]} == {"senses.a.throttle", "senses.b.timeout"}


def test_a_bad_choice_exits_2_listing_the_valid_values(inst: Path) -> None:
    for args, values in ((["thread", "list", "--status", "broken"], "'queued', 'started'"),
                         (["logs", "--source", "bogus"], "'reflex', 'workflow', 'system', 'signal'"),
                         (["mesh", "--format", "yaml"], "'tree', 'mermaid', 'dot', 'json'"),
                         (["service", "status", "--platform", "windows"], "'linux', 'macos'")):
        result = cli(*args)
        assert result.exit_code == 2 and values in result.output, (args, result.output)
    assert {s.value for s in ThreadStatus} == set(STATUSES)
    assert {s.value for s in LogSource} >= {"reflex", "workflow", "system", "signal"}


def test_limits_and_times_are_checked_by_click(inst: Path) -> None:
    for args in (["logs", "-n", "-1"], ["thread", "list", "-n", "-1"], ["sense", "show", "disk", "-n", "-1"]):
        result = cli(*args)
        assert result.exit_code == 2 and "greater than or equal to 0" in result.output, (args, result.output)
    for since in ("1h30m", "1w", "2026-08-01", "2026-08-01T12:00:00+02:00", "1785600000"):
        assert cli("logs", "--since", since).exit_code == 0, since
    bad = cli("logs", "--since", "1w2x")
    assert bad.exit_code == 2 and "1h30m" in bad.output
    # one grammar with nerve.yaml's durations: what config check refuses, --since refuses too
    backwards = cli("logs", "--since", "30m1h")
    assert backwards.exit_code == 2 and "largest first" in backwards.output
    for args in (["logs"], ["thread", "list"], ["sense", "show", "disk", "--chart"]):
        empty = cli(*args, "--since", "1h", "--until", "2h")  # until is earlier than since
        assert empty.exit_code == 2 and "not after --since" in empty.output, (args, empty.output)


def test_version(inst: Path) -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.output.strip() == f"nerve {nerve_cli.__version__}"
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert f'version = "{nerve_cli.__version__}"' in pyproject


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o default -F"), ("zsh", "#compdef nerve"),
                                           ("fish", "complete --command nerve")])
def test_completion_scripts(shell: str, marker: str) -> None:
    script = run(env={"_NERVE_COMPLETE": f"source_{shell}"})
    assert script.returncode == 0 and marker in script.stdout and "_NERVE_COMPLETE" in script.stdout


def _complete(words: str, home: Path, **env: str) -> list[str]:
    line = run(env={"_NERVE_COMPLETE": "complete_bash", "COMP_WORDS": words,
                    "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
                    "NERVE_HOME": str(home), **env})
    assert line.returncode == 0, line.stderr
    return line.stdout.split()


def test_dynamic_completion_of_names(inst: Path) -> None:
    assert _complete("nerve sense show cpu", inst) == ["cpu-percent", "cpu-temp"]
    assert _complete("nerve sense disable d", inst) == ["disk"]
    assert _complete("nerve workflow run ", inst) == ["review"]
    assert _complete("nerve emit ", inst) == ["task.created"]
    (inst / "data").mkdir(exist_ok=True)
    store = LogStore(inst / "data" / "logs.db")
    for _ in range(3):
        store.workflow_event(store.allocate_run_id(), "review", "queued", {"workflow": "review"})
    store.close()
    assert _complete("nerve thread show ", inst) == ["run-3", "run-2", "run-1"]
    elsewhere = write_instance(inst.parent / "other", "senses:\n  other-sense: {}\n", {})
    assert _complete(f"nerve sense show --home {elsewhere} o", inst) == ["other-sense"]


def test_completion_reads_files_without_importing_the_engine(inst: Path) -> None:
    env = {**os.environ, "_NERVE_COMPLETE": "complete_bash", "COMP_WORDS": "nerve sense show c", "COMP_CWORD": "3",
           "NERVE_HOME": str(inst)}
    done = subprocess.run([sys.executable, "-X", "importtime", str(NERVE)], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["cpu-percent", "cpu-temp"]
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    heavy = {m for m in loaded if m.startswith(("nerve_cli.kernel", "nerve_cli.config", "nerve_cli.store",
                                                "sqlite_utils", "asyncio", "git"))}
    assert not heavy, heavy


ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_time_display_rule_under_berlin(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    (home / "data").mkdir()
    store = LogStore(home / "data" / "logs.db")
    store.append("system", "summer", None, {"n": 1}, ts=1785585600000)  # 2026-08-01T12:00:00Z
    store.append("system", "winter", None, {"n": 2}, ts=1796126400000)  # 2026-12-01T12:00:00Z
    store.close()
    env = {"TZ": "Europe/Berlin", "NERVE_HOME": str(home), "COLUMNS": "200"}
    local = run("logs", "--format", "table", env=env).stdout
    assert "2026-08-01 14:00:00 CEST" in local and "2026-12-01 13:00:00 CET" in local
    utc = run("logs", "--utc", "--format", "table", env=env).stdout
    assert "2026-08-01 12:00:00 UTC" in utc
    assert "2026-08-01 12:00:00 UTC" in run("logs", "--format", "table", env={**env, "NERVE_UTC": "1"}).stdout
    # for scripts (a pipe, --format tsv|csv): RFC 3339 UTC, whatever the zone or --utc
    for args in ((), ("--format", "tsv"), ("--format", "csv"), ("--utc",)):
        piped = run("logs", *args, env=env).stdout
        sep = "," if "csv" in args else "\t"
        assert f"2026-08-01T12:00:00.000Z{sep}system{sep}summer" in piped, (args, piped)
        assert f"2026-12-01T12:00:00.000Z{sep}system{sep}winter" in piped, (args, piped)
    # a date typed without a zone is read in the zone times are shown in
    since = run("logs", "--json", "--since", "2026-12-01T13:00", env=env).stdout
    assert [json.loads(line)["type"] for line in since.splitlines()] == ["winter"]
    assert run("logs", "--json", "--since", "2026-12-01T13:00", "--utc", env=env).stdout == ""


def test_a_long_table_on_a_terminal_is_shown_as_compact_aligned_columns(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    (home / "data").mkdir()
    store = LogStore(home / "data" / "logs.db")
    for i in range(300):
        store.append("system", "tick", f"s{i}", {"n": i, "why": "x" * (200 if i == 7 else 1)}, ts=1785585600000 + i)
    store.close()
    env = {"NERVE_HOME": str(home), "COLUMNS": "200", "NERVE_UTC": "1"}
    shown = run("logs", "--format", "table", "-n", "300", env=env).stdout.splitlines()
    header = next(i for i, line in enumerate(shown) if line.split()[:2] == ["time", "source"])
    rows = [line for line in shown[header + 1:] if line.strip()]
    assert len(rows) == 300 and not any(ch in "".join(shown) for ch in "┃│━")  # every row, no borders drawn
    assert len({line.index("system") for line in rows}) == 1  # columns line up
    assert max(len(line) for line in rows) < 160  # the 200-character payload was cut, not spread over every line


def test_a_failure_has_the_same_error_type_with_or_without_an_engine(home: Path) -> None:
    from enginekit import RunningEngine
    from workflow_support import PINGPONG

    write_instance(home, "senses:\n  s: {}\nworkflows:\n  x: {}\n", {"s": "def compute(db, peers):\n    return 1\n"})
    (home / "workflows").mkdir()
    (home / "workflows" / "x.py").write_text(PINGPONG)
    env = {"NERVE_HOME": str(home)}
    assert run("workflow", "run", "x", "--prompt", "id=a rounds=1", env=env).returncode == 0  # run-1, completed
    asks = {"unknown workflow": ("workflow", "run", "nope", "--prompt", "p", "--json"),
            "answer a thread that does not wait": ("thread", "approve", "run-1", "--json"),
            "unknown sense": ("sense", "compute", "nope", "--json")}

    def errors() -> dict[str, tuple[int, str]]:
        out = {}
        for what, args in asks.items():
            done = run(*args, env=env)
            out[what] = (done.returncode, json.loads(done.stdout)["error"]["type"])
        return out

    offline = errors()
    assert offline == {"unknown workflow": (1, "workflow_error"), "answer a thread that does not wait": (1, "workflow_error"),
                       "unknown sense": (1, "sense_error")}, offline
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        assert errors() == offline  # the engine's answer carries the kind of error too
        engine.stop()


CLOSED_READER = [["logs"], ["logs", "--json"], ["sense", "list"], ["sense", "list", "--json"],
                 ["sense", "show", "cpu-percent"], ["sense", "show", "cpu-percent", "--format", "csv"],
                 ["thread", "list", "--json"], ["workflow", "list"], ["mesh"], ["mesh", "--format", "dot"],
                 ["config", "check"], ["doctor", "--json"], ["status", "--json"],  # an error document, too
                 ["--help"], ["sense", "--help"], ["--version"]]


def test_every_command_exits_141_quietly_when_its_reader_has_gone(inst: Path) -> None:
    """`nerve logs | head -1`: the pipe's reader leaves; the command stops, says nothing, exits 128 + SIGPIPE."""
    assert run("sense", "compute", "cpu-percent", env={"NERVE_HOME": str(inst)}).returncode == 0  # rows to show
    for args in CLOSED_READER:
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first write: every command meets it, however short
        try:
            done = subprocess.run([str(NERVE), *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60,
                                  env={**os.environ, "NO_COLOR": "1", "NERVE_HOME": str(inst)})
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (141, ""), args
    # and through a real `head`: quiet, 0 when the output was written before head left, else 141
    shell = subprocess.run(["bash", "-c", f"{NERVE} logs -n 1000 | head -1; echo \"${{PIPESTATUS[0]}}\" >&2"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "NERVE_HOME": str(inst)})
    assert shell.stdout.startswith("time") and shell.stderr.strip() in ("0", "141"), shell


def test_a_tables_time_column_follows_the_display_rule_in_sense_show(home: Path) -> None:
    env = {"TZ": "Europe/Berlin", "NERVE_HOME": str(home), "COLUMNS": "200"}
    assert run("init", env=env).returncode == 0
    assert run("sense", "compute", "disk-usage", env=env).returncode == 0
    shown = run("sense", "show", "disk-usage", env=env).stdout
    header, row = shown.split("sample: 1 row\n")[1].splitlines()[:2]
    assert header.split("\t")[0] == "ts" and re.fullmatch(ISO, row.split("\t")[0]), shown  # piped: RFC 3339 UTC
    drawn = run("sense", "show", "disk-usage", "--format", "table", env=env).stdout
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET", drawn), drawn  # on screen: local, zone shown
    document = json.loads(run("sense", "show", "disk-usage", "--json", env=env).stdout)
    sample = next(t for t in document["tables"] if t["name"] == "sample")
    assert sample["time_column"] == "ts" and isinstance(sample["newest"][0]["ts"], int)  # JSON keeps the stored value
