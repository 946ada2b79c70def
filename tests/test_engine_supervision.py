"""Process supervision on the real engine: crashes, timeouts, the lock, shutdown."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from enginekit import RunningEngine, completes, errors, nerve, read_logs, starts, wait_for, write_instance

from nerve_cli.ops.client import request

FAST = "def compute(db, peers):\n    return 1\n"


def test_killed_worker_is_logged_and_respawned_and_other_groups_keep_their_rhythm(home: Path) -> None:
    write_instance(home, """
        senses:
          victim: {group: fragile}
          steady: {group: solid}
        reflexes:
          - {sense: victim, on: [poke]}
          - {sense: steady, interval: 200ms}
    """, {"victim": "import time\n\ndef compute(db, peers):\n    time.sleep(30)\n    return 1\n", "steady": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="poke")
        wait_for(lambda: starts(home, "victim"), 10, what="victim to start")
        worker = next(w for w in engine.status()["workers"] if w["group"] == "fragile")
        before = len(completes(home, "steady"))
        os.kill(worker["pid"], signal.SIGKILL)
        wait_for(lambda: any("compute lost" in e["payload"]["message"] for e in errors(home, "victim")), 10,
                 what="the lost compute's error")
        exited = wait_for(lambda: read_logs(home, "system", "worker_exited", "fragile"), 10, what="exit log")
        assert "SIGKILL" in exited[0]["payload"]["why"] and exited[0]["payload"]["computing"] == ["victim"]
        wait_for(lambda: len([r for r in read_logs(home, "system", "worker_started", "fragile")]) >= 2, 15,
                 what="respawn")
        wait_for(lambda: len(completes(home, "steady")) >= before + 5, 10, what="steady to keep running")
        engine.stop()
    runs = [r["ts"] for r in starts(home, "steady")]
    gaps = [b - a for a, b in zip(runs, runs[1:])]
    assert max(gaps) < 1000, gaps  # 200ms rhythm; never stalled by the other group's crash


def test_a_sense_pending_when_its_worker_dies_waits_for_the_respawn_instead_of_failing(home: Path) -> None:
    write_instance(home, """
        senses:
          victim: {group: g}
          buddy: {group: g}
        reflexes:
          - {sense: victim, on: [kick]}
          - {sense: buddy, on: [poke]}
    """, {"victim": "import time\n\ndef compute(db, peers):\n    time.sleep(30)\n    return 1\n",
          "buddy": "import time\n\ndef compute(db, peers):\n    time.sleep(2)\n    return 'b'\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="kick")
        request(home, "emit", channel="poke")
        wait_for(lambda: starts(home, "victim") and starts(home, "buddy"), 10, what="both to start")
        request(home, "emit", channel="poke")  # buddy runs: this one waits as its pending run
        worker = engine.status()["workers"][0]
        os.kill(worker["pid"], signal.SIGKILL)
        wait_for(lambda: len(read_logs(home, "system", "worker_started", "g")) >= 2, 15, what="respawn")
        wait_for(lambda: any(c["payload"]["outcome"] == "signal" for c in completes(home, "buddy")), 15,
                 what="buddy's pending run on the new worker")
        engine.stop()
    assert not [e for e in errors(home, "buddy") if "could not take" in e["payload"]["message"]]


def test_a_stuck_compute_times_out_then_its_worker_is_killed_at_grace(home: Path) -> None:
    write_instance(home, """
        senses:
          spin: {group: g, timeout: 300ms, grace_period: 500ms}
        reflexes:
          - {sense: spin, on: [poke]}
    """, {"spin": "def compute(db, peers):\n    while True:\n        pass\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="poke")
        wait_for(lambda: any(e["payload"].get("error_type") == "TimeoutError" for e in errors(home, "spin")), 10,
                 what="timeout error")
        wait_for(lambda: read_logs(home, "system", "worker_killed", "g"), 10, what="grace kill")
        wait_for(lambda: len(read_logs(home, "system", "worker_started", "g")) >= 2, 15, what="respawn")
        engine.stop()
    timeout_at = next(e["ts"] for e in errors(home, "spin") if e["payload"].get("error_type") == "TimeoutError")
    killed_at = read_logs(home, "system", "worker_killed", "g")[0]["ts"]
    start_at = starts(home, "spin")[0]["ts"]
    assert 250 <= timeout_at - start_at < 2000
    assert 700 <= killed_at - start_at < 3000
    outcome = completes(home, "spin")[0]["payload"]["outcome"]
    assert outcome in ("lost", "timeout")


def test_each_compute_times_out_at_its_own_deadline_while_others_of_its_group_run(home: Path) -> None:
    sleepy = "import asyncio\n\nasync def compute(db, peers):\n    await asyncio.sleep({secs})\n    return 1\n"
    write_instance(home, """
        senses:
          patient: {group: g, timeout: 20s}
          short: {group: g, timeout: 400ms}
          later: {group: g, timeout: 1s}
        reflexes:
          - {sense: patient, on: [go]}
          - {sense: short, on: [go]}
          - {sense: later, on: [go]}
    """, {"patient": sleepy.format(secs=3), "short": sleepy.format(secs=10), "later": sleepy.format(secs=10)})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="go")
        wait_for(lambda: all(completes(home, s) for s in ("patient", "short", "later")), 15, what="three outcomes")
        engine.stop()
    outcome = {s: completes(home, s)[0] for s in ("patient", "short", "later")}
    assert outcome["patient"]["payload"]["outcome"] == "signal"
    for sense, limit in (("short", 400), ("later", 1000)):
        took = outcome[sense]["ts"] - starts(home, sense)[0]["ts"]
        assert outcome[sense]["payload"]["outcome"] == "timeout" and limit - 50 <= took < limit + 1500, (sense, took)


def test_a_worker_that_crashes_at_start_is_backed_off_not_spun(home: Path) -> None:
    write_instance(home, """
        senses:
          boom: {group: bad}
        reflexes:
          - {sense: boom, interval: 1s}
    """, {"boom": "import os\nos._exit(3)\n"})
    with RunningEngine(home) as engine:
        wait_for(lambda: len(read_logs(home, "system", "worker_exited", "bad")) >= 3, 15, what="repeated exits")
        worker = engine.status()["workers"][0]
        assert worker["state"] in ("backoff", "starting")
        delays = [r["payload"]["respawn_in"] for r in read_logs(home, "system", "worker_exited", "bad")]
        assert delays[:3] == sorted(delays[:3]) and delays[2] > delays[0]
        engine.stop()


def test_a_second_engine_is_refused_naming_the_holder(home: Path) -> None:
    write_instance(home, "senses:\n  a: {}\n", {"a": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        second = nerve("run", "--for", "1s", home=home)
        assert second.returncode == 1
        assert "already running" in second.stderr and f"pid {engine.proc.pid}" in second.stderr
        engine.stop()


def test_sigterm_exits_zero_and_flushes_the_log(home: Path) -> None:
    write_instance(home, "senses:\n  a: {}\nreflexes:\n  - {sense: a, interval: 100ms}\n", {"a": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "a"), 10)
        code, out = engine.stop(signal.SIGTERM)
    assert code == 0, out
    rows = read_logs(home)
    assert rows[-1]["type"] == "engine_stopped"
    assert len(starts(home, "a")) == len(completes(home, "a"))  # nothing left half-recorded
    assert not (home / "data" / "nerve.sock").exists()


def test_invalid_config_refuses_to_start(home: Path) -> None:
    write_instance(home, "senses:\n  a: {throttle: fast}\n", {"a": FAST})
    result = nerve("run", "--for", "1s", home=home)
    assert result.returncode == 1
    assert "senses.a.throttle" in result.stderr


def test_run_for_stops_by_itself(home: Path) -> None:
    write_instance(home, "senses:\n  a: {}\n", {"a": FAST})
    result = nerve("run", "--for", "1s", home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "engine stopped" in result.stdout


def test_ctrl_c_waits_for_a_running_compute_and_a_second_ctrl_c_forces(home: Path) -> None:
    write_instance(home, """
        engine: {shutdown_timeout: 20s}
        senses:
          slow: {timeout: 1m}
        reflexes:
          - {sense: slow, on: [go]}
    """, {"slow": "import time\n\ndef compute(db, peers):\n    time.sleep(30)\n    return 1\n"})
    import time

    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="go")
        wait_for(lambda: starts(home, "slow"), 10, what="the slow compute")
        engine.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "again to force" in engine.output(), 5, what="the first Ctrl-C to be heard")
        assert engine.proc.poll() is None  # still waiting for the compute
        began = time.monotonic()
        code, out = engine.stop(signal.SIGINT)
    assert code == 130, out
    assert time.monotonic() - began < 5
    assert read_logs(home)[-1]["type"] == "engine_stopped"
