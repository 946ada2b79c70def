"""Listener health on the real engine: what waits for each listener (backlog, age of the oldest), and replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, free_port, metric_samples, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, Emitter, got, store_sense
from typer.testing import CliRunner

from nerve_cli.contract.engine import status as status_document
from nerve_cli.schema.migrate import generate_migration

pytestmark = pytest.mark.timeout(90)

CONFIG = """
    senses:
      store: {{enabled: {enabled}}}
      plain: {{}}
    reflexes:
      - {{sense: store, on: [burst]}}
      - {{sense: plain, on: [burst]}}
"""


def nerve(*args: str, home: Path):
    """The CLI in this process (a subprocess per call costs half a second here)."""
    from nerve_cli.cli.app import app

    return CliRunner().invoke(app, [*args, "--home", str(home)])


def listeners(engine: RunningEngine) -> dict[str, dict]:
    return {lst["name"]: lst for lst in status_document(engine.status())["listeners"]}


def test_backlog_of_a_disabled_listener_drains_when_enabled_and_replay_delivers_again(home: Path) -> None:
    write_instance(home, CONFIG.format(enabled="false"), {"plain": "def compute(db, peers):\n    return None\n"})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    port = free_port()
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for i in range(50):
            assert emitter.emit("burst", {"i": i})["ok"]
        emitter.close()
        behind = wait_for(lambda: (found := listeners(engine).get("store")) and found["backlog"] == 50 and found,
                          what="the disabled listener's backlog (counted at most a second ago)")
        assert behind["enabled"] is False
        assert behind["sources"] == [{**behind["sources"][0], "source": "burst", "kind": "channel", "cursor": 0,
                                      "backlog": 50}]
        assert behind["age_s"] >= 0 and behind["oldest_ms"] is not None
        assert "plain" not in listeners(engine)  # its compute takes no trigger: it receives no events
        table = nerve("status", home=home).output
        assert "Listeners" in table and "store (disabled)" in table
        scraped = {(name, labels.get("sense"), labels.get("source")): v for name, labels, v in metric_samples(port)}
        assert scraped[("nerve_listener_backlog_events", "store", "burst")] == 50
        assert scraped[("nerve_listener_backlog_oldest_age_seconds", "store", "burst")] >= 0
        from nerve_cli.top.source import Source

        shown = {row["name"]: row for row in Source(home).snapshot().senses}  # what `nerve top` draws
        assert (shown["store"]["state"], shown["store"]["backlog"]) == ("disabled", 50)

        (home / "nerve.yaml").write_text(CONFIG.format(enabled="true"))
        wait_for(lambda: listeners(engine)["store"]["backlog"] == 0, 20, what="the backlog to drain")
        assert [p for _, _, p in got(home, "store")] == [{"i": i} for i in range(50)]

        dry = json.loads(nerve("sense", "replay", "store", "--source", "burst", "--from", "0", "--dry-run", "--json",
                               home=home).output)
        assert (dry["cursor_before"], dry["cursor_after"], dry["events"], dry["dry_run"]) == (50, 0, 50, True)
        assert listeners(engine)["store"]["sources"][0]["cursor"] == 50  # a dry run moved nothing
        refused = nerve("sense", "replay", "store", "--source", "nope", "--from", "0", home=home)
        assert refused.exit_code == 1 and "its sources: burst" in refused.output

        done = json.loads(nerve("sense", "replay", "store", "--source", "burst", "--from", "0", "--json",
                                home=home).output)
        assert (done["events"], done["delivered"]) == (50, "now")
        wait_for(lambda: len(got(home, "store")) == 100, 20, what="every event delivered again")
        assert [e for _, e, _ in got(home, "store")] == list(range(1, 51)) * 2  # each once more, in order
        again = json.loads(nerve("sense", "replay", "store", "--source", "burst", "--from", "26", "--json",
                                 home=home).output)
        assert (again["cursor_after"], again["events"]) == (25, 25)
        wait_for(lambda: len(got(home, "store")) == 125, 20, what="events from id 26 delivered again")
        code, out = engine.stop()
    assert code == 0, out
    moved = [r["payload"] for r in read_logs(home, "system", "cursor_moved")]
    assert [(m["from_id"], m["to_id"]) for m in moved] == [(50, 0), (50, 25)]
    assert any(c["payload"]["reason"] == "replay" for c in completes(home, "store"))


def health_signals(home: Path) -> list[dict]:
    import sqlite3

    conn = sqlite3.connect((home / "data" / "senses" / "nerve-health.db").resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM _signals ORDER BY id")]
    finally:
        conn.close()


def test_a_quiet_sense_goes_stale_signals_it_and_recovers(home: Path) -> None:
    write_instance(home, """
        engine: {health_interval: 1h}
        senses:
          flaky: {expect_signal_every: 700ms}
          steady: {}
        reflexes:
          - {sense: flaky, on: [poke]}
          - {sense: steady, interval: 1h}
    """, {"flaky": "def compute(db, peers):\n    return 'alive'\n", "steady": "def compute(db, peers):\n    return 1\n"})
    port = free_port()
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready()
        def senses() -> dict[str, dict]:
            return {s["name"]: s for s in status_document(engine.status())["senses"]}

        stale = wait_for(lambda: senses()["flaky"]["stale"] and senses()["flaky"], 10, what="flaky to go stale")
        assert stale["expect_signal_every_s"] == 0.7 and stale["stale_since_ms"] is not None
        assert senses()["steady"]["stale"] is False and senses()["steady"]["expect_signal_every_s"] is None
        wait_for(lambda: any("flaky" in h.get("went_stale", []) for h in health_signals(home)), 10,
                 what="nerve-health to signal that flaky went stale")
        assert "flaky" in health_signals(home)[-1]["stale"]
        gauges = {labels["sense"]: v for name, labels, v in metric_samples(port) if name == "nerve_sense_stale"}
        assert gauges == {"flaky": 1.0}
        from nerve_cli.top.source import Source

        assert {r["name"]: r["state"] for r in Source(home).snapshot().senses}["flaky"] == "stale"
        assert "stale since" in nerve("status", home=home).output

        assert nerve("emit", "poke", home=home).exit_code == 0
        wait_for(lambda: any("flaky" in h.get("recovered", []) for h in health_signals(home)), 10,
                 what="nerve-health to signal that flaky recovered")
        code, out = engine.stop()
    assert code == 0, out
    kinds = [r["type"] for r in read_logs(home, "system") if r["ref"] == "flaky" and r["type"].startswith("sense_")]
    assert kinds[:2] == ["sense_stale", "sense_fresh"]


def test_expect_signal_every_is_a_period() -> None:
    from nerve_cli.config.load import validate_text

    _, problems = validate_text("senses:\n  a: {expect_signal_every: 0s}\n  b: {expect_signal_every: often}\n")
    found = {p.path: p.message for p in problems}
    assert "longer than 0" in found["senses.a.expect_signal_every"]
    assert "duration" in found["senses.b.expect_signal_every"]


def test_replay_says_events_were_archived_only_when_they_were(home: Path) -> None:
    """A channel's ids are shared with the other channels of events.db: `sense replay` took the ids below its
    first event for archived ones and said so when nothing had been archived."""
    write_instance(home, "senses:\n  store: {}\nreflexes:\n  - {sense: store, on: [mine]}\n", {})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    for channel in ("other", "other", "other", "mine", "mine"):
        assert nerve("emit", channel, "{}", home=home).exit_code == 0
    assert nerve("sense", "compute", "store", home=home).exit_code == 0
    assert len(got(home, "store")) == 2
    replayed = nerve("sense", "replay", "store", "--source", "mine", "--from", "0", home=home)
    assert replayed.exit_code == 0, replayed.output
    assert "2 event(s) to receive" in replayed.output and "archived" not in replayed.output, replayed.output
    doc = json.loads(nerve("sense", "replay", "store", "--source", "mine", "--from", "0", "--dry-run", "--json",
                           home=home).output)
    assert doc["oldest_held"] is None
