"""Pause and resume senses: no compute starts while paused (named or a whole group), their events wait across
restarts, and at the resume one compute reads them all; nothing cascades, nerve.yaml is not edited."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, completes, last_signal, read_logs, starts, wait_for, write_instance

from nerve_cli.ops.client import request
from nerve_cli.ops.senses.pause import pause_senses

CONFIG = """
    senses:
      counter: {group: a}
      heard: {group: a}
      beat: {group: b}
      beat2: {group: b}
    reflexes:
      - {sense: counter, on: [tick]}
      - {sense: heard, on: [counter]}
      - {sense: beat, interval: 100ms}
      - {sense: beat2, interval: 100ms}
"""
SENSES = {
    "counter": "def compute(db, peers, trigger):\n    return {'n': len(trigger.events), "
               "'ticks': [e.payload for e in trigger.events]}\n",
    "heard": "def compute(db, peers, trigger):\n    return len(trigger.events)\n",
    "beat": "def compute(db, peers):\n    return 1\n",
    "beat2": "def compute(db, peers):\n    return 1\n",
}


def _state(engine: RunningEngine, sense: str) -> str:
    return engine.status()["senses"][sense]["state"]


def test_a_paused_sense_computes_nothing_keeps_its_events_across_a_restart_and_reads_them_at_resume(home: Path) -> None:
    write_instance(home, CONFIG, SENSES)
    config_before = (home / "nerve.yaml").read_text()
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="tick", payload=0)
        wait_for(lambda: last_signal(home, "counter") == {"n": 1, "ticks": [0]}, 20, what="counter's first compute")
        wait_for(lambda: completes(home, "counter"), 20, what="its run_complete row")
        paused = json.loads(cli("sense", "pause", "counter", "--json").output)
        assert paused == {"version": 1, "senses": [{"sense": "counter", "status": "paused", "paused": True}],
                          "via": "engine"}
        assert _state(engine, "counter") == "paused"
        before = len(starts(home, "counter"))
        for i in (1, 2, 3):
            request(home, "emit", channel="tick", payload=i)
        refused = cli("sense", "compute", "counter")
        assert refused.exit_code == 1 and "counter is paused" in refused.output
        time.sleep(0.5)
        assert len(starts(home, "counter")) == before
        # nothing cascades: its listener keeps its reflex and its state, the config is as it was
        assert _state(engine, "heard") in ("idle", "pending", "running")
        assert (home / "nerve.yaml").read_text() == config_before
        engine.stop()

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        assert _state(engine, "counter") == "paused"
        request(home, "emit", channel="tick", payload=4)
        time.sleep(0.5)
        assert len(starts(home, "counter")) == before
        table = cli("sense", "resume", "counter")
        assert table.exit_code == 0 and "resumed" in table.output
        wait_for(lambda: last_signal(home, "counter") == {"n": 4, "ticks": [1, 2, 3, 4]}, 20,
                 what="one compute reading every event that waited")
        # (the log is written in batches: its run_start row may follow the signal)
        wait_for(lambda: len(starts(home, "counter")) == before + 1, 20, what="the resumed compute's run_start")
        wait_for(lambda: completes(home, "heard") and last_signal(home, "heard") == 1, 20,
                 what="its listener hearing the resumed signal")
        engine.stop()
    kinds = [(r["type"], r["payload"]["via"]) for r in read_logs(home, "system", ref="counter")
             if r["type"] in ("sense_paused", "sense_resumed")]
    assert kinds == [("sense_paused", "nerve sense pause"), ("sense_resumed", "nerve sense resume")]


def test_a_group_pauses_and_resumes_and_a_pause_is_kept_with_no_engine(home: Path) -> None:
    write_instance(home, CONFIG, SENSES)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: len(completes(home, "beat")) >= 2, 20, what="beat on its interval")
        done = pause_senses(home, [], "b", via="test")
        assert [(s["sense"], s["status"]) for s in done["senses"]] == [("beat", "paused"), ("beat2", "paused")]
        time.sleep(0.3)  # a compute under way when paused finishes
        counts = (len(starts(home, "beat")), len(starts(home, "beat2")))
        time.sleep(0.6)
        assert (len(starts(home, "beat")), len(starts(home, "beat2"))) == counts
        assert pause_senses(home, ["beat"], None, via="test")["senses"][0]["status"] == "unchanged"
        pause_senses(home, [], "b", via="test", resume=True)
        wait_for(lambda: len(starts(home, "beat")) > counts[0] + 1, 20, what="beat on its interval again")
        unknown = cli("sense", "pause", "--group", "nope")
        assert unknown.exit_code == 1 and "no sense in group 'nope'" in unknown.output
        engine.stop()

    offline = pause_senses(home, ["beat"], None, via="test")
    assert (offline["via"], offline["senses"][0]["status"]) == ("offline", "paused")
    stopped = json.loads(cli("status", "--json").output)  # the engine stopped: the files say it is paused
    assert {s["name"]: s["state"] for s in stopped["senses"]}["beat"] == "paused"
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        ran = len(starts(home, "beat"))
        time.sleep(0.6)
        assert (_state(engine, "beat"), len(starts(home, "beat"))) == ("paused", ran)
        assert len(starts(home, "beat2")) > 0
        engine.stop()
