"""The kernel runs on uvloop when it can import it, and on asyncio's own loop when it cannot."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli import eventloop
from nerve_cli.ops.client import request

PING_PONG = """
senses:
  a: {group: g1}
  b: {group: g2}
reflexes:
  - {sense: a, on: [b, go]}
  - {sense: b, on: [a]}
"""

COUNTER = """
def compute(db, peers):
    return 1
"""


def _loop_of(home: Path) -> str:
    started = wait_for(lambda: read_logs(home, "system", "engine_started"), what="engine_started")
    return started[-1]["payload"]["loop"]


def _hops(home: Path, env: dict[str, str] | None = None) -> str:
    """Run a two-group ping-pong for 20 hops; the loop the engine said it ran on."""
    write_instance(home, PING_PONG, {"a": COUNTER, "b": COUNTER})
    with RunningEngine(home, env=env) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="go")
        wait_for(lambda: len(read_logs(home, "reflex", "run_complete", "b")) >= 10, 20, what="ten hops each way")
        code, output = engine.stop()
    assert code == 0, output
    return _loop_of(home)


def test_the_engine_runs_on_uvloop_when_it_is_installed(home: Path) -> None:
    assert _hops(home) == "uvloop"


def test_without_uvloop_the_engine_falls_back_to_asyncio_and_works(home: Path, tmp_path: Path) -> None:
    shim = tmp_path / "no-uvloop"
    (shim / "uvloop").mkdir(parents=True)
    (shim / "uvloop" / "__init__.py").write_text("raise ImportError('uvloop is not installed here')\n")
    assert _hops(home, env={"PYTHONPATH": str(shim)}) == "asyncio"


def test_nerve_loop_asyncio_refuses_uvloop() -> None:
    probe = ("import asyncio\nfrom nerve_cli import eventloop\n"
             "async def main():\n    return eventloop.name()\n"
             "print(eventloop.run(main()))\n")
    for env, expected in (({}, "uvloop"), ({"NERVE_LOOP": "asyncio"}, "asyncio")):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30,
                             env={**_clean_env(), **env})
        assert out.stdout.strip() == expected, out.stderr


def test_run_returns_the_coroutine_result_on_either_loop(monkeypatch) -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert eventloop.run(answer()) == 42
    monkeypatch.setenv("NERVE_LOOP", "asyncio")
    assert eventloop.run(answer()) == 42


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NERVE_LOOP", None)
    return env
