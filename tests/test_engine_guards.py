"""Guard rails on the real engine: the resource watchdog, penalties, quarantine."""

from __future__ import annotations

import json
from pathlib import Path

from enginekit import RunningEngine, completes, nerve, read_logs, starts, wait_for, write_instance

from nerve_cli.ops.client import request

FAST = "def compute(db, peers):\n    return 1\n"
HOG = """
import time

def compute(db, peers):
    hoard = []
    while True:
        hoard.append(bytearray(8 * 1024 * 1024))
        time.sleep(0.01)
"""
SPIN = "def compute(db, peers):\n    while True:\n        pass\n"


def _steady_never_stalled(home: Path) -> None:
    """The other group kept its 200 ms rhythm: no gap far beyond its own usual one (a loaded machine
    stretches them all alike; a stall behind the breach would stand out)."""
    runs = [r["ts"] for r in starts(home, "steady")]
    gaps = sorted(b - a for a, b in zip(runs, runs[1:]))
    assert gaps and gaps[-1] < max(1000, 5 * gaps[len(gaps) // 2]), gaps


def test_memory_hog_is_stopped_by_the_watchdog_and_named(home: Path) -> None:
    write_instance(home, """
        groups:
          greedy: {memory_limit: 150MB}
        senses:
          hog: {group: greedy, timeout: 1m}
          steady: {group: calm}
        reflexes:
          - {sense: hog, on: [go]}
          - {sense: steady, interval: 200ms}
    """, {"hog": HOG, "steady": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="go")
        kill = wait_for(lambda: read_logs(home, "system", "watchdog_kill", "greedy"), 20, what="watchdog")[0]
        assert kill["payload"]["computing"] == ["hog"]
        assert "memory" in kill["payload"]["problem"] and "150 MiB" not in kill["payload"]["problem"][:3]
        wait_for(lambda: len(read_logs(home, "system", "worker_started", "greedy")) >= 2, 15, what="respawn")
        engine.stop()
    _steady_never_stalled(home)


def test_busy_loop_over_the_cpu_limit_is_stopped(home: Path) -> None:
    write_instance(home, """
        groups:
          busy: {cpu_limit: 5%, cpu_window: 1s}  # a spin gets more than 5% of a core even at load 30 on 2 cores
        senses:
          spin: {group: busy, timeout: 1m}
          steady: {group: calm}
        reflexes:
          - {sense: spin, on: [go]}
          - {sense: steady, interval: 200ms}
    """, {"spin": SPIN, "steady": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="go")
        kill = wait_for(lambda: read_logs(home, "system", "watchdog_kill", "busy"), 20, what="watchdog")[0]
        assert kill["payload"]["computing"] == ["spin"] and "CPU" in kill["payload"]["problem"]
        engine.stop()
    _steady_never_stalled(home)


def test_failing_sense_is_penalised_with_growing_backoff(home: Path) -> None:
    write_instance(home, """
        engine: {failure_backoff_after: 2, failure_backoff_first: 300ms}
        senses:
          flaky: {}
        reflexes:
          - {sense: flaky, interval: 50ms}
    """, {"flaky": "def compute(db, peers):\n    raise RuntimeError('down')\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(read_logs(home, "system", "penalised", "flaky")) >= 3, 20, what="penalties")
        status = engine.status()["senses"]["flaky"]
        assert status["state"] in ("penalised", "running")
        engine.stop()
    whys = [r["payload"]["why"] for r in read_logs(home, "system", "penalised", "flaky")]
    assert "failed 2 times" in whys[0] and "300ms" in whys[0] and "600ms" in whys[1]


def test_crashing_sense_is_quarantined_survives_restart_and_reset_lifts_it(home: Path) -> None:
    write_instance(home, """
        engine: {quarantine_after: 2, quarantine_window: 1m, quarantine_for: 1h, failure_backoff_after: 10}
        senses:
          crasher: {group: doomed}
          buddy: {group: doomed}
        reflexes:
          - {sense: crasher, on: [go]}
          - {sense: buddy, interval: 200ms}
    """, {"crasher": "import os\n\ndef compute(db, peers):\n    os._exit(9)\n", "buddy": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for attempt in range(2):
            wait_for(lambda: engine.status()["workers"][0]["state"] == "ready", 15, what="worker ready")
            request(home, "emit", channel="go")
            wait_for(lambda: len(completes(home, "crasher")) > attempt, 10, what="crash")
        wait_for(lambda: read_logs(home, "system", "quarantined", "crasher"), 10, what="quarantine")
        request(home, "emit", channel="go")
        wait_for(lambda: engine.status()["senses"]["crasher"]["skipped"] >= 1, 10, what="skip counted")
        buddy_now = len(completes(home, "buddy"))
        wait_for(lambda: len(completes(home, "buddy")) >= buddy_now + 3, 15, what="buddy keeps running")
        assert engine.stop()[0] == 0
    offline = json.loads(nerve("sense", "show", "crasher", "--json", home=home).stdout)
    assert offline["blocked"]["state"] == "quarantined"  # read from disk when no engine runs
    with RunningEngine(home) as engine:
        engine.wait_ready()
        status = engine.status()["senses"]["crasher"]
        assert status["state"] == "quarantined" and "died 2 times" in status["blocked_why"]
        shown = nerve("status", home=home)
        assert "quarantined until" in shown.stdout
        detail = nerve("sense", "show", "crasher", home=home)
        assert "quarantined until" in detail.stdout and "died 2 times" in detail.stdout
        refused = nerve("sense", "compute", "crasher", home=home)
        assert refused.returncode == 1 and "nerve sense reset crasher" in refused.stderr
        result = nerve("sense", "reset", "crasher", home=home)
        assert result.returncode == 0, result.stderr
        assert engine.status()["senses"]["crasher"]["state"] == "idle"
        engine.stop()
