"""`nerve workflow new|list|run|disable|enable`, standalone and through a running engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli, nerve
from loadclock import IdleClock
from workflow_support import PINGPONG, make_instance

from nerve_cli.ops.client import engine_running
from nerve_cli.store.logs import query_logs, workflow_runs

LOGS = Path("data") / "logs.db"




@pytest.fixture
def instance(home: Path) -> Path:
    result = cli("init")
    assert result.exit_code == 0, result.output
    return home


def test_new_scaffolds_registers_commits_and_the_scaffold_runs_end_to_end(instance: Path) -> None:
    before = (instance / "nerve.yaml").read_text()
    result = cli("workflow", "new", "review")
    assert result.exit_code == 0, result.output
    assert (instance / "workflows" / "review.py").is_file()
    text = (instance / "nerve.yaml").read_text()
    assert "review:" in text and "concurrency: 1" in text and "overflow: queue" in text
    kept = [line for line in before.splitlines() if line.lstrip().startswith("#")]
    assert kept and all(line in text for line in kept)  # the user's comments survive
    log = subprocess.run(["git", "-C", str(instance), "log", "--format=%s", "-1", "--name-only"],
                         capture_output=True, text=True).stdout
    assert "nerve: workflow new review" in log and "workflows/review.py" in log and "nerve.yaml" in log

    run = nerve("workflow", "run", "review", "--prompt", "the release notes", home=instance)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "run-1 started: max 100 rounds" in lines
    assert [line.split()[0] for line in lines if line.startswith("#")] == ["#1", "#2", "#3", "#4"]
    assert "approved" in lines and lines[-1] == "run-1 completed (end) after 4 rounds"
    rows = query_logs(instance / LOGS, source="workflow", type="message", ref="run-1")
    assert [r["payload"]["role"] for r in rows] == ["__start__", "author", "reviewer", "author", "reviewer"]
    assert not (instance / "data" / "nerve.lock").read_text().strip()  # lock released


def test_new_refuses_bad_and_existing_names(instance: Path) -> None:
    assert cli("workflow", "new", "review").exit_code == 0
    again = cli("workflow", "new", "review")
    assert again.exit_code == 1 and "workflows/review.py already exists" in again.output
    bad = cli("workflow", "new", "Bad/Name")
    assert bad.exit_code == 1 and "is not allowed" in bad.output
    assert not (instance / "workflows" / "Bad").exists()


def test_list_shows_settings_and_counts(home: Path) -> None:
    make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 2, "overflow": "drop"},
                                                        "ghost": {"idempotent": True}}})
    assert nerve("workflow", "run", "x", "--prompt", "rounds=1", home=home).returncode == 0
    result = cli("workflow", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)["workflows"]}
    assert rows["x"]["config"]["concurrency"] == 2 and rows["x"]["config"]["overflow"] == "drop"
    assert rows["x"]["config"]["drain_timeout_s"] == 30.0
    assert rows["x"]["threads"] == {"completed": 1} and rows["x"]["file_exists"] is True
    assert rows["ghost"]["file_exists"] is False and rows["ghost"]["config"]["idempotent"] is True
    table = cli("workflow", "list")
    assert "1 completed" in table.output and "ghost (workflows/ghost.py missing)" in table.output


def test_run_exit_codes_and_refusals(home: Path) -> None:
    failing = PINGPONG.replace("def until(messages):", "def until(messages):\n    raise ValueError('lost')")
    make_instance(home, {"x": PINGPONG, "bad": failing}, {"engine": {"max_rounds": 2},
                                                          "workflows": {"x": {}, "bad": {}, "off": {"enabled": False}}})
    capped = nerve("workflow", "run", "x", "--prompt", "forever", "--max-rounds", "9", home=home)
    assert capped.returncode == 0 and capped.stdout.splitlines()[-1] == "run-1 completed (max_rounds) after 2 rounds"
    failed = nerve("workflow", "run", "bad", "--prompt", "p", home=home)
    assert failed.returncode == 1
    assert "run-2 failed (moderator raised ValueError: lost at workflows/bad.py:" in failed.stdout
    unknown = nerve("workflow", "run", "nope", "--prompt", "p", home=home)
    assert unknown.returncode == 1 and "unknown workflow 'nope'" in unknown.stderr
    off = nerve("workflow", "run", "off", "--prompt", "p", home=home)
    assert off.returncode == 1 and "workflow off is disabled" in off.stderr


def test_disable_and_enable_edit_and_commit(instance: Path) -> None:
    assert cli("workflow", "new", "review").exit_code == 0
    assert cli("workflow", "disable", "review").exit_code == 0
    rows = {r["name"]: r for r in json.loads(cli("workflow", "list", "--json").output)["workflows"]}
    assert rows["review"]["config"]["enabled"] is False
    refused = nerve("workflow", "run", "review", "--prompt", "p", home=instance)
    assert refused.returncode == 1 and "disabled" in refused.stderr
    assert cli("workflow", "enable", "review").exit_code == 0
    subjects = subprocess.run(["git", "-C", str(instance), "log", "--format=%s", "-2"],
                              capture_output=True, text=True).stdout.splitlines()
    assert subjects == ["nerve: workflow enable review", "nerve: workflow disable review"]


def test_run_goes_through_a_running_engine_and_doctor_fix_is_refused(home: Path) -> None:
    make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {}}})
    env = {**os.environ, "NERVE_HOME": str(home)}
    engine = subprocess.Popen([sys.executable, "-m", "nerve_cli", "run"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        clock = IdleClock(20)
        while not engine_running(home):
            assert engine.poll() is None, engine.stderr.read()
            assert not clock.expired(), "engine did not start"
            time.sleep(0.05)
        run = nerve("workflow", "run", "x", "--prompt", "id=e rounds=3 sleep=0.05", home=home)
        assert run.returncode == 0, run.stdout + run.stderr
        assert [line for line in run.stdout.splitlines() if line.startswith("e round")] == [
            "e round 1", "e round 2", "e round 3"]
        assert run.stdout.splitlines()[-1] == "run-1 completed (end) after 3 rounds"
        origin = query_logs(home / LOGS, type="queued")[0]["payload"]["origin"]
        assert origin != {"kind": "cli", "by": "nerve workflow run"}  # launched by the engine, not standalone
        # doctor --fix must not write logs.db behind the engine's back
        from nerve_cli.store.logs import open_db

        conn = open_db(home / LOGS)
        conn.execute("UPDATE workflow_runs SET status = 'queued' WHERE run_id = 'run-1'")
        conn.close()
        refused = nerve("doctor", "--fix", home=home)
        assert refused.returncode == 1 and "an engine is running" in refused.stderr
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=20)
    assert workflow_runs(home / LOGS)[0]["status"] == "queued"  # untouched by the refused fix


def _ctrl_c_as_in_a_terminal() -> None:
    # a process started with SIGINT ignored (the test runner's workers ignore it) keeps it ignored
    # across exec, and Python then installs no KeyboardInterrupt: give the child a terminal's default
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_run_through_the_engine_exits_4_when_dropped_and_130_when_interrupted(home: Path) -> None:
    from enginekit import RunningEngine, wait_for

    make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1, "overflow": "drop"}}})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        env = {**os.environ, "NERVE_HOME": str(home)}
        follower = subprocess.Popen([sys.executable, "-m", "nerve_cli", "workflow", "run", "x", "--prompt",
                                     "id=s rounds=3 gate=2", "--json"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_in_a_terminal)
        assert json.loads(follower.stdout.readline())["round"] == 1  # its first round printed; round 2 waits for the gate file
        dropped = nerve("workflow", "run", "x", "--prompt", "id=d rounds=1", "--json", home=home)
        assert dropped.returncode == 4, dropped.stdout + dropped.stderr
        assert json.loads(dropped.stdout.splitlines()[-1])["status"] == "dropped"
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=20)
        assert follower.returncode == 130, (out, err)
        outcome = json.loads(out.splitlines()[-1])
        assert (outcome["event"], outcome["status"], outcome["via"]) == ("outcome", "interrupted", "engine")
        assert "goes on in the engine" in outcome["reason"] and "Traceback" not in err
        # the thread itself was not stopped: its gate opened, it finishes
        (home / "gate").write_text("")
        wait_for(lambda: {r["run_id"]: r["status"] for r in workflow_runs(home / LOGS)}["run-1"] == "completed", 20,
                 what="run-1 to complete")
        engine.stop()
    assert {r["run_id"]: r["status"] for r in workflow_runs(home / LOGS)} == {"run-1": "completed",
                                                                              "run-2": "dropped"}


def test_a_max_rounds_too_large_to_log_is_refused_cleanly_standalone_and_through_the_engine(home: Path) -> None:
    from enginekit import RunningEngine

    make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {}}})
    huge = str(10**20)  # beyond a 64-bit JSON integer

    def refused() -> None:
        done = nerve("workflow", "run", "x", "--prompt", "id=h rounds=1", "--max-rounds", huge, home=home)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "max_rounds must be a whole number from 1 to" in done.stderr and "Error:" not in done.stderr
        assert "Traceback" not in done.stderr and "TypeError" not in done.stderr, done.stderr

    refused()
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        refused()
        engine.stop()
    assert workflow_runs(home / LOGS) == []
