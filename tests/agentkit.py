"""Agents in the tests: an instance with agents, `nerve agent install claude`, and harness simulators to run.

The simulator (harnesssim.py) follows Claude Code's documented hook protocol; it
knows only `.claude/settings.json` and reports its turns as JSON lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import nerve
from loadclock import scaled

SIM = Path(__file__).resolve().parent / "harnesssim.py"


def install_claude(home: Path, agent: str, project: Path) -> dict:
    project.mkdir(parents=True, exist_ok=True)
    done = nerve("agent", "install", "claude", agent, "--project", str(project), "--json", home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Sim:
    """One harness session (a real process running the hooks the settings file names)."""

    def __init__(self, project: Path, log: Path, session: str, *args: str) -> None:
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(SIM), str(project), str(log), "--session", session, *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def kill(self) -> None:
        """kill -9, as a harness dies: its hooks' processes are left to notice by themselves (what is left of
        its process group after a while is killed, so no test leaves a waiting hook behind)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + scaled(3)
        while time.monotonic() < deadline and _group_alive(self.proc.pid):
            time.sleep(0.05)
        _kill_group(self.proc.pid)


def turns(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def ended(log: Path) -> list[dict]:
    return [t for t in turns(log) if t["t"] == "end"]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # every hook noticed and left
        pass
