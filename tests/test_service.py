"""`nerve service`: the unit that keeps `nerve run` alive is valid, and install/uninstall drive the supervisor."""

from __future__ import annotations

import configparser
import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from enginekit import nerve, write_instance


def instance(home: Path) -> Path:
    return write_instance(home, "senses: {}\nengine: {shutdown_timeout: 7s}\n", {})


def parsed(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment]
    parser.read_string(text)
    return parser


@pytest.mark.parametrize("folder", ["nerve-home", "with space %and percent"])
def test_dry_run_prints_a_valid_systemd_unit(tmp_path: Path, folder: str) -> None:
    home = instance(tmp_path / folder)
    result = nerve("service", "install", "--dry-run", "--platform", "linux", home=home)
    assert result.returncode == 0, result.stderr
    unit = parsed(result.stdout)
    service = unit["Service"]
    assert service["Restart"] == "on-failure" and service["Type"] == "simple"
    assert service["TimeoutStopSec"] == "17"  # shutdown_timeout 7s + 10s
    assert service["WorkingDirectory"] == str(home.resolve()).replace("%", "%%")
    assert service["ExecStart"].startswith(f"{sys.executable} -m nerve_cli run --home ")
    assert unit["Install"]["WantedBy"] == "default.target"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # parsed above; systemd-analyze is the stricter judge where it exists
    path = tmp_path / "nerve-test.service"
    path.write_text(result.stdout)
    verify = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in (verify.stdout + verify.stderr).splitlines() if "nerve-test.service" in line]
    assert verify.returncode == 0 and not complaints, verify.stderr


def test_dry_run_for_macos_is_a_launchd_agent(home: Path) -> None:
    instance(home)
    result = nerve("service", "install", "--dry-run", "--platform", "macos", home=home)
    assert result.returncode == 0, result.stderr
    agent = plistlib.loads(result.stdout.encode())
    assert agent["ProgramArguments"] == [sys.executable, "-m", "nerve_cli", "run", "--home", str(home.resolve())]
    assert agent["KeepAlive"] == {"SuccessfulExit": False} and agent["RunAtLoad"] is True
    assert agent["Label"].startswith("dev.nerve.nerve-home-")


def test_install_writes_the_unit_enables_it_and_uninstall_removes_it(home: Path, tmp_path: Path) -> None:
    """No systemd user session runs in a test sandbox: a stand-in `systemctl` on PATH records what is asked of it."""
    instance(home)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in *is-enabled*) echo enabled;; *is-active*) echo active;; esac\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "NO_COLOR": "1"}
    env.pop("NERVE_HOME", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nerve_cli", "service", *args, "--platform", "linux",
                               "--home", str(home)], capture_output=True, text=True, env=env, timeout=60)

    result = run("install")
    assert result.returncode == 0, result.stderr
    units = list((tmp_path / "config/systemd/user").glob("nerve-nerve-home-*.service"))
    assert len(units) == 1 and f"wrote {units[0]}" in result.stdout
    assert parsed(units[0].read_text())["Service"]["Restart"] == "on-failure"
    name = units[0].name
    assert calls.read_text().splitlines()[:2] == ["--user daemon-reload", f"--user enable --now {name}"]
    status = run("status")
    assert f"{name}: enabled, active" in status.stdout and "no engine answers" in status.stdout
    result = run("uninstall")
    assert result.returncode == 0, result.stderr
    assert not units[0].exists()
    assert f"--user disable --now {name}" in calls.read_text()
    assert "no service installed" in run("status").stdout


def test_without_a_user_session_install_uninstall_and_status_fail_saying_why(home: Path, tmp_path: Path) -> None:
    """A stand-in `systemctl` that answers as the real one does with no user bus: is-enabled reads the files,
    everything else fails with `Failed to connect to bus`."""
    instance(home)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in *is-enabled*) echo disabled; exit 1;; esac\n'
                    'echo "Failed to connect to bus: No medium found" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "NO_COLOR": "1", "COLUMNS": "400"}
    env.pop("NERVE_HOME", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nerve_cli", "service", *args, "--platform", "linux",
                               "--home", str(home)], capture_output=True, text=True, env=env, timeout=60)

    install = run("install")
    assert install.returncode == 1 and "Failed to connect to bus" in install.stderr
    [unit] = (tmp_path / "config/systemd/user").glob("nerve-nerve-home-*.service")
    status = run("status")
    assert status.returncode == 1 and f"{unit.name}: disabled, unknown" in status.stdout
    assert f"`systemctl --user is-active {unit.name}` failed: Failed to connect to bus" in status.stderr
    as_json = run("status", "--json")
    document = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and document["active"] == "unknown" and "Failed to connect to bus" in document["problem"]
    uninstall = run("uninstall")
    assert uninstall.returncode == 1 and "ran:" not in uninstall.stdout
    assert f"`systemctl --user disable --now {unit.name}` failed: Failed to connect to bus" in uninstall.stderr
    assert "the unit file is kept" in uninstall.stderr and "loginctl enable-linger" in uninstall.stderr
    assert unit.exists()  # it may still be enabled or running: nothing is half-removed
