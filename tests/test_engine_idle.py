"""An engine with nothing to do sleeps: no part of it looks at anything on a timer of its own."""

from __future__ import annotations

import time
from pathlib import Path

from enginekit import RunningEngine, write_instance


def _sleeps(pid: int) -> int:
    """How often the engine's main thread (its event loop) has blocked: each wake-up follows one."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/task/{pid}/status has no voluntary_ctxt_switches")


def test_an_engine_with_no_senses_and_no_agents_does_not_wake_every_second(home: Path) -> None:
    """The Codex deliveries looked at the config every second, with no agent configured: a wake-up a second of
    every engine. They now look when a reload changes the config (tests/test_agents_harness.py: a reload's
    agent is delivered to)."""
    write_instance(home, "senses: {}\n", {})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        time.sleep(1.0)  # the start's own work done
        before, started = _sleeps(engine.proc.pid), time.monotonic()
        time.sleep(5.0)
        woke, seconds = _sleeps(engine.proc.pid) - before, time.monotonic() - started
        engine.stop()
    assert woke < 0.8 * seconds, f"the idle engine's loop woke {woke} times in {seconds:.1f} s"
