"""Pattern subscriptions (`on: ["pr.*", "ci.>"]`) on the real engine: which channels a pattern hears, each event
with its real source, exactly once across a worker's kill -9; and what `config check` says of patterns."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, Emitter, kill_workers

from nerve_cli.schema.migrate import generate_migration

FAST_RECOVERY = """
engine:
  respawn_backoff_first: 50ms
  respawn_backoff_max: 50ms
  failure_backoff_after: 1000
  quarantine_after: 1000
"""

# Keeps each event it receives with its source and the trigger that woke the compute.
HEARD = """
import json, time
from .schema import Got

def compute(db, peers, trigger):
    time.sleep(SLOW)
    n = db.query("SELECT count(*) AS c FROM got")[0]["c"]
    for i, e in enumerate(trigger.events):
        db.insert(Got(n=n + i, event_id=e.id, payload=json.dumps(
            {"source": e.source, "kind": e.kind, "payload": e.payload, "woken_by": trigger.source})))
    return {"events": len(trigger.events)}
"""


def pattern_instance(home: Path, on: str, slow: float = 0.0, extra: str = "") -> Path:
    write_instance(home, f"""
        {FAST_RECOVERY}
        senses:
          heard: {{group: listeners}}
        reflexes:
          - {{sense: heard, on: {on}}}
        {extra}
    """.replace("\n        ", "\n"), {})
    write_sense(home, "heard", HEARD.replace("SLOW", repr(slow)), STORE_SCHEMA)
    generate_migration(home / "senses" / "heard")
    return home


def heard(home: Path) -> list[dict]:
    path = home / "data" / "senses" / "heard.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT event_id, payload FROM got ORDER BY n").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [{"id": i, **json.loads(p)} for i, p in rows]


def test_a_star_hears_one_token_and_each_event_keeps_its_own_channel(home: Path) -> None:
    pattern_instance(home, '["pr.*", "ci.>"]')
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for channel in ["pr.opened", "prx.opened", "pr.a.b", "pr", "pr.closed", "ci", "ci.a.b", "ci.done"]:
            assert emitter.emit(channel, {"on": channel})["ok"]
        emitter.close()
        wait_for(lambda: len(heard(home)) >= 4, 20, what="the pattern's listener to hear 4 events")
        time.sleep(0.3)  # anything it should not hear would have come by now
        code, out = engine.stop()
    assert code == 0, out
    got = heard(home)
    assert [(e["source"], e["kind"], e["payload"]["on"]) for e in got] == [
        ("pr.opened", "channel", "pr.opened"), ("pr.closed", "channel", "pr.closed"),
        ("ci.a.b", "channel", "ci.a.b"), ("ci.done", "channel", "ci.done")]
    # the trigger names a channel that woke it, never the pattern
    assert {e["woken_by"] for e in got} <= {"pr.opened", "pr.closed", "ci.a.b", "ci.done", None}
    assert not {e["woken_by"] for e in got} & {"pr.*", "ci.>"}


def test_a_debounced_pattern_names_the_channel_in_its_trigger(home: Path) -> None:
    pattern_instance(home, '["pr.*"], debounce: 200ms')
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for channel in ["pr.opened", "pr.closed"]:
            assert emitter.emit(channel, {"on": channel})["ok"]
        emitter.close()
        wait_for(lambda: len(heard(home)) >= 2, 20, what="the debounced burst")
        code, out = engine.stop()
    assert code == 0, out
    assert [e["source"] for e in heard(home)] == ["pr.opened", "pr.closed"]
    assert heard(home)[0]["woken_by"] == "pr.closed"


def test_events_emitted_while_stopped_reach_the_pattern_at_the_next_start(home: Path) -> None:
    pattern_instance(home, '["pr.*"]')
    for channel in ["pr.opened", "other", "pr.closed"]:
        answer = json.loads(cli("emit", channel, json.dumps({"on": channel}), "--home", str(home), "--json").stdout)
        assert answer["listeners"] == ([] if channel == "other" else ["heard"]), answer
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(heard(home)) >= 2, 20, what="the backlog")
        time.sleep(0.2)
        code, out = engine.stop()
    assert code == 0, out
    assert [e["source"] for e in heard(home)] == ["pr.opened", "pr.closed"]


@pytest.mark.timeout(120)
def test_a_pattern_listener_killed_10_times_during_a_burst_loses_and_repeats_nothing(home: Path) -> None:
    pattern_instance(home, '["pr.*"]', slow=0.005)
    rng = random.Random(7)
    total = 400
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        sent = threading.Event()

        def burst() -> None:
            for i in range(total):
                channel = ("pr.opened", "pr.closed", "prx.opened")[i % 3]
                assert emitter.emit(channel, {"i": i})["ok"]
                time.sleep(0.008)
            sent.set()

        sender = threading.Thread(target=burst)
        sender.start()
        kill_workers(engine, "listeners", 10, rng)
        sender.join(60)
        assert sent.is_set()
        emitter.close()
        wanted = [i for i in range(total) if i % 3 != 2]
        wait_for(lambda: len(heard(home)) >= len(wanted), 30, what="the listener to catch up")
        time.sleep(0.2)
        code, out = engine.stop()
    assert code == 0, out
    got = heard(home)
    assert [e["payload"]["i"] for e in got] == wanted
    assert [e["source"] for e in got] == [("pr.opened", "pr.closed")[i % 3] for i in wanted]
    assert len([e for e in read_logs(home, "system", "worker_exited") if e["ref"] == "listeners"]) >= 10


def check(home: Path, *args: str):
    return cli("config", "check", "--home", str(home), "--fast", *args)


def test_config_check_lists_what_each_pattern_matches_and_warns_for_one_matching_nothing(home: Path) -> None:
    pattern_instance(home, '["pr.*", "ci.>", "zz.*"]', extra="channels:\n  pr.opened: {}\n  prx.opened: {}\n")
    cli("emit", "ci.a.b", "{}", "--home", str(home))  # seen in data/events.db, named nowhere in nerve.yaml
    cli("emit", "pr.a.b", "{}", "--home", str(home))  # seen, but two tokens after pr: not pr.*'s
    result = check(home, "--json")
    data = json.loads(result.stdout)
    assert data["valid"], data
    by = {p["pattern"]: p for p in data["patterns"]}
    assert by["pr.*"] == {"pattern": "pr.*", "reflexes": [0], "declared": ["pr.opened"], "seen": [], "senses": []}
    assert by["ci.>"]["declared"] == [] and by["ci.>"]["seen"] == ["ci.a.b"]
    assert by["zz.*"]["declared"] == by["zz.*"]["seen"] == []
    warned = [p for p in data["problems"] if "zz.*" in p["message"]]
    assert [(p["path"], p["severity"]) for p in warned] == [("reflexes[0].on[2]", "warning")], data["problems"]
    assert "matches no channel" in warned[0]["message"]
    assert not [p for p in data["problems"] if "`pr.*`" in p["message"] or "`ci.>`" in p["message"]]
    assert "pattern" not in {c["name"] for c in data["channels"]} and "pr.*" not in {c["name"] for c in data["channels"]}
    # a channel heard only through a pattern is not "listened to by no reflex"
    assert not [p for p in data["problems"] if p["path"] == "channels.pr.opened"], data["problems"]
    text = check(home).stdout
    assert "pr.*  (on: of reflexes[0]) → pr.opened" in text
    assert "ci.>  (on: of reflexes[0]) → ci.a.b (seen)" in text
    assert "zz.*  (on: of reflexes[0]) → nothing yet" in text


@pytest.mark.parametrize("bad, why", [("pr*", "mixes a wildcard"), ("pr.>.x", "comes last"),
                                      ("pr..*", "empty token"), ("*x.done", "mixes a wildcard")])
def test_a_wildcard_inside_a_token_is_a_config_error_naming_the_key_and_the_fix(home: Path, bad: str, why: str) -> None:
    pattern_instance(home, f'["ok", "{bad}"]')
    result = check(home, "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    errors = [p for p in data["problems"] if p["severity"] == "error"]
    assert [p["path"] for p in errors] == ["reflexes[0].on[1]"], errors
    assert why in errors[0]["message"] and "`*` for one whole dot-separated token" in errors[0]["message"]


def test_an_agent_or_a_channels_entry_cannot_be_a_pattern(home: Path) -> None:
    pattern_instance(home, '["pr.*"]', extra="channels:\n  'gh.*': {}\nagents:\n  bot: {on: ['pr.*']}\n")
    data = json.loads(check(home, "--json").stdout)
    errors = {p["path"]: p["message"] for p in data["problems"] if p["severity"] == "error"}
    assert "is a pattern" in errors["agents.bot.on[0]"] and "reflex's on:" in errors["agents.bot.on[0]"]
    assert "one channel" in errors["channels.gh.*"], errors
