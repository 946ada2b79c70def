"""One environment for models: the engine says which llm folder and default model its roles use, the caller is
told when its own differs, model calls land in llm's logs.db, and a service gets keys and LLM_USER_PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from enginekit import RunningEngine, nerve, write_instance
from llmkit import llm_home  # noqa: F401  (fixture)

ROLE = """
from nerve_cli.sdk import END, WorkflowDefinition, llm_role

workflow = WorkflowDefinition(roles={"writer": llm_role()},
                              moderator=lambda m: "writer" if m[-1].role == "__start__" else END)
"""


def llm(folder: Path, *args: str) -> str:
    """The `llm` command with LLM_USER_PATH=folder, run in this process (its CLI is a click group)."""
    from click.testing import CliRunner
    from llm.cli import cli

    done = CliRunner().invoke(cli, list(args), env={"LLM_USER_PATH": str(folder)}, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def test_two_llm_folders_the_engines_decides_and_the_caller_is_told(
        tmp_path: Path, home: Path, llm_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engines, callers = tmp_path / "engine-llm", llm_home  # the caller's folder is the test's LLM_USER_PATH
    engines.mkdir()
    llm(engines, "models", "default", "echo")  # the engine's default: echo
    write_instance(home, "workflows:\n  notes: {}\n  broken: {model: nope}\n", {})
    (home / "workflows").mkdir()
    for name in ("notes", "broken"):
        (home / "workflows" / f"{name}.py").write_text(ROLE)
    with RunningEngine(home, env={"LLM_USER_PATH": str(engines)}) as engine:
        engine.wait_ready(groups=0)
        status = json.loads(nerve("status", "--json", home=home).stdout)
        assert status["engine"]["llm"] == {"folder": str(engines), "from_env": True, "default_model": "echo",
                                           "logging": True}
        assert f"models: llm folder {engines} (LLM_USER_PATH), default model echo" in nerve("status", home=home).stdout
        run = nerve("workflow", "run", "notes", "--prompt", "hello", "--json", home=home)
        assert run.returncode == 0, run.stderr
        round_line = json.loads(run.stdout.splitlines()[0])
        assert round_line["meta"]["model"] == "echo"  # the engine's default, not the caller's
        told = " ".join(run.stderr.split())
        assert (f"the engine's model-backed roles use llm folder {engines} (LLM_USER_PATH), default model echo; "
                f"yours is llm folder {callers} (LLM_USER_PATH), default model llm's built-in default") in told
        assert f"LLM_USER_PATH={callers}" in told and "workflows.notes.model" in told
        doctor = json.loads(nerve("doctor", "--json", home=home).stdout)
        assert doctor["llm"]["engine"]["folder"] == str(engines) and doctor["llm"]["here"]["folder"] == str(callers)
        assert doctor["llm"]["same"] is False
        failed = nerve("workflow", "run", "broken", "--prompt", "hello", "--json", home=home)
        assert failed.returncode == 1
        reason = json.loads(failed.stdout.splitlines()[-1])["reason"]
        assert "unknown model 'nope'" in reason and f"roles here use llm folder {engines}" in reason, reason
        engine.stop()
    # the call is in the engine's llm logs.db, where `llm logs` finds it; the caller's folder has none
    logged = json.loads(llm(engines, "logs", "-n", "5", "--json"))
    assert [entry["model"] for entry in logged] == ["echo"] and "hello" in logged[0]["prompt"]
    assert not (callers / "logs.db").exists()


def test_a_model_call_is_logged_where_llm_logs_unless_logging_is_off(llm_home: Path) -> None:
    import llm as llm_library

    from nerve_cli.roles.llm import log_to_llm
    from nerve_cli.roles.llm_env import llm_env, mismatch

    response = llm_library.get_model("echo").prompt("hello")
    response.text()
    llm(llm_home, "logs", "off")
    log_to_llm(response)
    assert not (llm_home / "logs.db").exists()  # `llm logs off` is the user's to decide
    assert llm_env().logging is False
    llm(llm_home, "logs", "on")
    log_to_llm(response)
    assert [e["model"] for e in json.loads(llm(llm_home, "logs", "-n", "5", "--json"))] == ["echo"]
    assert mismatch(llm_env(), llm_env()) is None  # one environment: nothing to say


def test_a_call_is_logged_in_the_folder_its_environment_named_when_it_was_made(
        llm_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy is written by a thread after the round goes on: it goes where LLM_USER_PATH pointed at the call,
    not where it points when the writer gets to it (a later call's folder)."""
    import llm as llm_library

    from nerve_cli.roles.llm_log import LlmLog

    log = LlmLog()
    start = log._start
    monkeypatch.setattr(log, "_start", lambda: None)  # the writer not running yet: it gets there late
    response = llm_library.get_model("echo").prompt("first")
    response.text()
    log.submit(response)
    later = tmp_path / "later"
    monkeypatch.setenv("LLM_USER_PATH", str(later))
    start()
    assert log.flush()
    assert [e["model"] for e in json.loads(llm(llm_home, "logs", "-n", "5", "--json"))] == ["echo"]
    assert not (later / "logs.db").exists()


def test_service_install_gives_the_engine_keys_and_llm_user_path(tmp_path: Path, home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    own = tmp_path / "keys.env"
    own.write_text("# mine\nANTHROPIC_API_KEY='sk-ant-1'\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "sk-secret",
           "LLM_USER_PATH": str(tmp_path / "llm"), "PATH": f"{_fake_systemctl(tmp_path)}:{os.environ['PATH']}"}
    env.pop("NERVE_HOME", None)
    args = [sys.executable, "-m", "nerve_cli", "service", "install", "--platform", "linux", "--home", str(home),
            "--env", "OPENAI_API_KEY", "--env", f"LLM_USER_PATH={tmp_path / 'llm'}", "--env-file", str(own),
            "--metrics", "9464"]
    dry = subprocess.run([*args, "--dry-run"], capture_output=True, text=True, env=env, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "sk-secret" not in dry.stdout  # values never go into the unit
    assert "--metrics 127.0.0.1:9464" in dry.stdout
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    unit = next((tmp_path / "config" / "systemd" / "user").glob("nerve-*.service"))
    private = tmp_path / "config" / "nerve" / f"{unit.name}.env"
    text = unit.read_text()
    assert f"EnvironmentFile={private}" in text and f"EnvironmentFile={own}" in text and "sk-secret" not in text
    assert private.stat().st_mode & 0o777 == 0o600
    assert private.read_text().splitlines()[1:] == ['OPENAI_API_KEY="sk-secret"', f'LLM_USER_PATH="{tmp_path / "llm"}"']
    assert "LLM_USER_PATH" not in done.stderr  # passed: no hint needed
    bare = subprocess.run([*args[:9], "--dry-run"], capture_output=True, text=True, env=env, timeout=60)
    assert bare.returncode == 0 and "EnvironmentFile" not in bare.stdout
    missing = subprocess.run([*args[:9], "--env", "NOT_SET_ANYWHERE", "--dry-run"], capture_output=True,
                             text=True, env=env, timeout=60)
    assert missing.returncode == 1 and "--env NOT_SET_ANYWHERE: it is not set here" in missing.stderr
    removed = subprocess.run([sys.executable, "-m", "nerve_cli", "service", "uninstall", "--platform", "linux",
                              "--home", str(home)], capture_output=True, text=True, env=env, timeout=60)
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists() and not private.exists() and own.exists()


def _fake_systemctl(tmp_path: Path) -> Path:
    """No systemd user session runs in a test sandbox: a stand-in answers as an enabled, active unit."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "systemctl"
    fake.write_text('#!/bin/sh\ncase "$*" in *is-enabled*) echo enabled;; *is-active*) echo active;; esac\n')
    fake.chmod(0o755)
    return folder
