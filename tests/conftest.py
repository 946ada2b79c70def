"""Shared fixtures: every test gets its own NERVE_HOME, never the real one.

The suite runs as it would on a fresh machine, whatever machine runs it: HOME is
an empty folder, git has no identity (no global or system config, no
GIT_AUTHOR_*/GIT_COMMITTER_* variables), and Python writes bytecode as it does
by default, so a test that needs more must bring it and a product path that
depends on the machine fails here first. Set at import time, so
every test process and every child they start inherits it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from loadclock import IdleClock

os.environ.setdefault("TERMINAL_WIDTH", "200")
os.environ.setdefault("COLUMNS", "200")
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"

GIT_IDENTITY_VARIABLES = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL")
os.environ["HOME"] = tempfile.mkdtemp(prefix="home-")
atexit.register(shutil.rmtree, os.environ["HOME"], True)
os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
for _variable in GIT_IDENTITY_VARIABLES:
    os.environ.pop(_variable, None)
# Python writes and trusts .pyc files as it does by default (some machines turn that off): a stale one
# is a bug a fresh machine meets
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "nerve-home"
    monkeypatch.setenv("NERVE_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    # llm keeps its keys, default model and logs here: never the user's real llm config
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm-user"))
    return home


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    """The instance folder NERVE_HOME points at (not created)."""
    return _isolated_home


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """The per-test timeout (pyproject: 60 s, or a test's own mark), counted in idle-machine seconds.

    A SIGALRM every second spends the test's budget at the machine's current
    contention (loadclock), so a test that is slow because the machine is
    loaded is not failed for it, and one that hangs on an idle machine still
    is, as soon as before. Other methods, and tests run off the main thread,
    keep pytest-timeout's own wall-clock timer.
    """
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None
    import pytest_timeout

    clock = IdleClock(settings.timeout)

    def tick(signum: int, frame: Any) -> None:
        if clock.expired():
            signal.setitimer(signal.ITIMER_REAL, 0)
            pytest_timeout.timeout_sigalrm(item, settings)  # fails the test where it stands

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # what pytest_timeout_cancel_timer calls
    signal.signal(signal.SIGALRM, tick)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    return True
