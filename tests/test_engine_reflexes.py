"""The reflex semantics on the real engine with real workers."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from enginekit import RunningEngine, completes, read_logs, starts, wait_for, write_instance
from loadclock import scaled

from nerve_cli.ops.client import request

FAST = "def compute(db, peers):\n    return 1\n"
SLOW = "import time\n\ndef compute(db, peers):\n    time.sleep({secs})\n    return 1\n"


def test_chain_runs_in_order_across_groups(home: Path) -> None:
    write_instance(home, """
        senses:
          a: {group: g1}
          b: {group: g2}
          c: {group: g1}
        reflexes:
          - {sense: a, interval: 300ms}
          - {sense: b, on: [a]}
          - {sense: c, on: [b]}
    """, {"a": FAST, "b": FAST, "c": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: len(completes(home, "c")) >= 3, 15, what="three computes of c")
        code, out = engine.stop()
    assert code == 0, out
    rows = [r for r in read_logs(home, "reflex") if r["ref"] in ("a", "b", "c")]
    # every start of b follows a completion of a, every start of c a completion of b
    seen_complete = {"a": 0, "b": 0}
    started = {"b": 0, "c": 0}
    for row in rows:
        if row["type"] == "run_complete" and row["ref"] in seen_complete:
            seen_complete[row["ref"]] += 1
        if row["type"] == "run_start" and row["ref"] in started:
            upstream = {"b": "a", "c": "b"}[row["ref"]]
            started[row["ref"]] += 1
            assert started[row["ref"]] <= seen_complete[upstream], rows
            assert row["payload"]["reason"] == f"on {upstream}"


def test_triggers_during_a_slow_compute_become_exactly_one_more_compute(home: Path) -> None:
    write_instance(home, """
        senses:
          slow: {}
        reflexes:
          - {sense: slow, on: [poke]}
    """, {"slow": SLOW.format(secs=1.0)})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="poke")
        wait_for(lambda: starts(home, "slow"), 10, what="first compute")
        for _ in range(10):
            request(home, "emit", channel="poke")
        assert len(completes(home, "slow")) == 0, "the burst must land while the first compute runs"
        wait_for(lambda: len(completes(home, "slow")) >= 2, 15, what="the pending compute")
        state = engine.status()["senses"]["slow"]
        assert (state["running"], state["pending"], state["runs"]) == (False, False, 2)
        assert state["coalesced"] == 9
        health = request(home, "compute", sense="nerve-health")["payload"]
        assert health["backpressure"]["slow"]["coalesced"] == 9  # visible in the health signal too
        code, _ = engine.stop()
    assert len(starts(home, "slow")) == 2


def test_throttle_defers_a_trigger_to_the_window_end(home: Path) -> None:
    write_instance(home, """
        senses:
          t: {throttle: 1s}
        reflexes:
          - {sense: t, on: [poke]}
    """, {"t": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="poke")
        wait_for(lambda: completes(home, "t"), 10, what="first compute")
        request(home, "emit", channel="poke")
        request(home, "emit", channel="poke")
        wait_for(lambda: len(completes(home, "t")) >= 2, 10, what="the deferred compute")
        engine.stop()
    first, second = starts(home, "t")[:2]
    assert second["ts"] - first["ts"] >= 990
    assert len(starts(home, "t")) == 2


def test_interval_resumes_from_disk_and_an_overdue_sense_runs_once(home: Path) -> None:
    write_instance(home, """
        senses:
          hourly: {}
          overdue: {}
        reflexes:
          - {sense: hourly, interval: 1h}
          - {sense: overdue, interval: 1h}
    """, {"hourly": FAST, "overdue": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "hourly") and completes(home, "overdue"), 10, what="first runs")
        assert engine.stop()[0] == 0
    # pretend `overdue` last completed three hours ago (three missed periods)
    conn = sqlite3.connect(home / "data" / "logs.db")
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'last_complete:overdue'",
                     (str(int((time.time() - 3 * 3600) * 1000)),))
        conn.execute("UPDATE logs SET ts = ts - 3 * 3600 * 1000 WHERE ref_id = 'overdue'")
    conn.close()
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "overdue")) >= 2, 10, what="the overdue run")
        status = engine.status()["senses"]
        assert status["overdue"]["runs"] == 1
        assert status["hourly"]["runs"] == 0
        assert status["hourly"]["next_due"] > time.time() + 3000  # an hour after its run on disk
        assert status["overdue"]["next_due"] > time.time() + 3000  # no back-fill
        assert engine.stop()[0] == 0
    assert len(starts(home, "hourly")) == 1
    assert len(starts(home, "overdue")) == 2


def test_an_instance_from_before_the_completion_anchors_keeps_its_rhythm(home: Path) -> None:
    write_instance(home, """
        senses:
          hourly: {}
        reflexes:
          - {sense: hourly, interval: 1h}
    """, {"hourly": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "hourly"), 10, what="the first run")
        assert engine.stop()[0] == 0
    # as an older Nerve left it: the completion is in the logs only
    conn = sqlite3.connect(home / "data" / "logs.db")
    with conn:
        conn.execute("DELETE FROM meta WHERE key LIKE 'last_complete:%' OR key = 'completion_anchors'")
    conn.close()
    with RunningEngine(home) as engine:
        engine.wait_ready()
        assert engine.status()["senses"]["hourly"]["next_due"] > time.time() + 3000  # found in the logs
        assert engine.stop()[0] == 0
    assert len(starts(home, "hourly")) == 1
    conn = sqlite3.connect(home / "data" / "logs.db")
    keys = {k for (k,) in conn.execute("SELECT key FROM meta")}
    conn.close()
    assert {"last_complete:hourly", "completion_anchors"} <= keys  # scanned once: the next start reads meta


def test_a_signal_starts_its_listener_with_nothing_else_going_on(home: Path) -> None:
    write_instance(home, """
        senses:
          a: {group: g1}
          b: {group: g2}
        reflexes:
          - {sense: a, on: [go]}
          - {sense: b, on: [a]}
    """, {"a": FAST, "b": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="go")
        wait_for(lambda: completes(home, "b"), 3, what="b, started by a's signal alone")
        engine.stop()


def test_config_warnings_are_shown_when_the_engine_starts(home: Path) -> None:
    write_instance(home, """
        senses:
          cpu: {}
          b: {}
        reflexes:
          - {sense: b, on: [cpuu]}
    """, {"cpu": FAST, "b": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        code, out = engine.stop()
    assert code == 0
    assert "did you mean sense `cpu`" in out


def test_new_interval_senses_that_start_together_share_a_few_slots_not_the_second(home: Path) -> None:
    """Never completed: each first runs at its slot (scheduler.first_slot), spread a millisecond per interval
    sense in 10 ms slots: 40 senses over 40 ms (four wake-ups of the engine), not over the whole second."""
    n = 40
    senses = "\n".join(f"  s{i}: {{}}" for i in range(n))
    reflexes = "\n".join(f"  - {{sense: s{i}, interval: 1s}}" for i in range(n))
    write_instance(home, f"senses:\n{senses}\nreflexes:\n{reflexes}\n", {f"s{i}": FAST for i in range(n)})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: all(starts(home, f"s{i}") for i in range(n)), 30, what="a first compute of every sense")
        engine.stop()
    first = sorted(min(r["ts"] for r in starts(home, f"s{i}")) for i in range(n))
    assert first[-1] - first[0] < scaled(0.04 + 0.2) * 1000, first  # 40 ms and what the machine's load adds
