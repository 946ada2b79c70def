"""Shared fixtures and helpers: every test gets its own NERVE_HOME, never the real one; `cli()` runs the
CLI in this process, `nerve()` as a real one.

The suite runs as it would on a fresh machine, whatever machine runs it: HOME is
an empty folder, git has no identity (no global or system config, no
GIT_AUTHOR_*/GIT_COMMITTER_* variables), and Python writes bytecode as it does
by default, so a test that needs more must bring it and a product path that
depends on the machine fails here first. Set at import time, so
every test process and every child they start inherits it.

Two tiers: `make test-fast` runs the modules in FAST (`-m fast`): in-process tests (no worker, engine or
CLI process; git may run), under a minute; `make test` runs everything. In the fast tier starting a Python
process fails the test, so a module that starts one cannot stay in FAST by mistake.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from loadclock import IdleClock, scaled

# the in-process tier (`make test-fast`)
FAST = {
    "test_archive_events", "test_archive_history", "test_archive_lines", "test_archive_problems", "test_blobs",
    "test_config_edit", "test_config_validate", "test_engine_idle", "test_fleet_config", "test_import_graph", "test_irreversible_commands", "test_lifecycle_marks",
    "test_llm_role", "test_logs_store", "test_loop_parts", "test_migrate_apply", "test_migrate_generate", "test_migrate_templates", "test_output_plain",
    "test_readme", "test_scheduler", "test_scheduler_equivalence", "test_scheduler_guards", "test_schema_declare",
    "test_sense_chart", "test_sensedb", "test_supervision_policy", "test_thread_archived",
    "test_views", "test_vocab", "test_workflow_thread",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__ in FAST:
            item.add_marker(pytest.mark.fast)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: in-process, no child process (make test-fast)")


@pytest.fixture(autouse=True)
def _no_process_in_the_fast_tier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.config.getoption("-m") != "fast":
        return

    popen = subprocess.Popen.__init__

    def refuse_python(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        if argv and "python" in os.path.basename(str(argv[0])):  # a worker, an engine, the CLI (git may run)
            raise AssertionError(f"{request.node.nodeid} starts {argv[:4]}: it does not belong in conftest.FAST")
        popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_python)


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
    # an OTEL_* or NATS_* variable of the shell running the tests would send every engine's traces (or fleet
    # credentials) somewhere: the tests that want them set their own
    for name in [n for n in os.environ if n.startswith(("OTEL_", "NATS_"))]:
        monkeypatch.delenv(name)
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


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    """Run `nerve ARGS` in this process (Typer's CliRunner); the Rich console is rebuilt around it."""
    from typer.testing import CliRunner  # imported by the tests that run the CLI, not by every test

    from nerve_cli.cli import output
    from nerve_cli.cli.app import app

    output.reset()
    try:
        return CliRunner().invoke(app, list(args), env=env)
    finally:
        output.reset()


def nerve(*args: str, home: Path, timeout: float = 60.0, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run `nerve ARGS --home HOME` as a real process (`stdin`: text piped into it), without colour."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("NERVE_HOME", None)
    return subprocess.run([sys.executable, "-m", "nerve_cli", *args, "--home", str(home)],
                          capture_output=True, text=True, timeout=scaled(timeout), env=env, input=stdin)
