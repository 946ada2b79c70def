"""Fan-out from a compute: `emit(channel, payload, key=...)` is committed with the compute, delivered like any emit."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, read_logs, sense_rows, wait_for, write_instance, write_sense

from nerve_cli.ops.client import request
from nerve_cli.schema.diff import generate_migration

FAN = textwrap.dedent('''
    from nerve_cli.sdk import KEEP, emit

    def compute(db, peers, trigger):
        for event in trigger.events:
            n = event.payload["n"]
            emit("left", {"n": n, "side": "left"})
            emit("right", {"n": n, "side": "right"}, key=f"right-{n}")
        return KEEP
''')
BOOM = textwrap.dedent('''
    from nerve_cli.sdk import emit

    def compute(db, peers, trigger):
        for event in trigger.events:
            emit("left", {"n": -1, "side": "boom"})
        raise RuntimeError("after emitting: nothing of it is kept")
''')
STORE_SCHEMA = textwrap.dedent('''
    from nerve_cli.sdk import table

    @table(pk="n")
    class Got:
        n: int
        source: str
        value: int
''')
STORE = textwrap.dedent('''
    from .schema import Got

    def compute(db, peers, trigger):
        n = db.query("SELECT count(*) AS c FROM got")[0]["c"]
        for i, e in enumerate(trigger.events):
            db.insert(Got(n=n + i, source=e.source, value=e.payload["n"]))
        return {"got": len(trigger.events)}
''')
EVENTS = 40


def _got(home: Path, sense: str) -> list[tuple[str, int]]:
    return sense_rows(home, sense, "SELECT source, value FROM got ORDER BY n")


def test_a_compute_fans_out_to_two_channels_each_listener_gets_every_event_once(home: Path) -> None:
    write_instance(home, """
        senses:
          fan: {group: fan}
          boom: {group: fan}
          l: {group: listeners}
          r: {group: listeners}
        reflexes:
          - {sense: fan, on: [go]}
          - {sense: boom, on: [bad]}
          - {sense: l, on: [left]}
          - {sense: r, on: [right]}
    """, {"fan": FAN, "boom": BOOM})
    for name in ("l", "r"):
        write_sense(home, name, STORE, STORE_SCHEMA)
        assert generate_migration(home / "senses" / name) is not None
    dry = json.loads(cli("sense", "compute", "fan", "--dry-run", "--event", 'go={"n": 7}', "--json").output)
    assert dry["emits"] == [{"channel": "left", "payload": {"n": 7, "side": "left"}, "key": None},
                            {"channel": "right", "payload": {"n": 7, "side": "right"}, "key": "right-7"}], dry

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "emit", channel="bad", payload={"n": 0})
        wait_for(lambda: [e for e in read_logs(home, "system", "error", "boom")], 30, what="boom's error")
        for n in range(EVENTS):
            request(home, "emit", channel="go", payload={"n": n})
        wait_for(lambda: len(_got(home, "l")) >= EVENTS and len(_got(home, "r")) >= EVENTS, 60,
                 what="both listeners to hear every emit")
        engine.stop()

    assert _got(home, "l") == [("left", n) for n in range(EVENTS)]  # every event once, in order; none of boom's
    assert _got(home, "r") == [("right", n) for n in range(EVENTS)]
    emits = [r for r in read_logs(home, "signal", "emit") if r["ref"] in ("left", "right")]
    assert len(emits) == 2 * EVENTS
    conn = sqlite3.connect(home / "data" / "senses" / "boom.db")
    try:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = '_nerve_emits'").fetchone()[0] == 0 or \
            conn.execute("SELECT count(*) FROM _nerve_emits").fetchone()[0] == 0
    finally:
        conn.close()


def test_emit_outside_a_compute_says_where_it_belongs() -> None:
    from nerve_cli.errors import SenseError
    from nerve_cli.sdk import emit

    try:
        emit("left", {"n": 1})
    except SenseError as exc:
        assert "inside a compute" in str(exc)
    else:
        raise AssertionError("emit outside a compute was accepted")


def test_a_compute_that_emits_to_what_it_hears_stops_at_the_causal_bound(home: Path) -> None:
    write_instance(home, """
        senses:
          pinger: {}
        reflexes:
          - {sense: pinger, on: [ping]}
    """, {"pinger": textwrap.dedent('''
        from nerve_cli.sdk import KEEP, emit

        def compute(db, peers, trigger):
            for event in trigger.events:
                emit("ping", {"n": event.payload["n"] + 1})
            return KEEP
    ''')})
    checked = json.loads(cli("config", "check", "--json").output)
    assert any("pinger → ping → pinger" in p["message"] for p in checked["problems"]), checked["problems"]
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="ping", payload={"n": 0})
        wait_for(lambda: read_logs(home, "system", "causal_refused"), 30, what="the emit loop to be refused")
        engine.stop()
    # the outside emit is depth 0; the pinger's emits are 1..8; the ninth is refused
    pings = [r["payload"] for r in read_logs(home, "signal", "emit") if r["ref"] == "ping"]
    assert len(pings) == 9
    (refused,) = read_logs(home, "system", "causal_refused")
    assert (refused["payload"]["what"], refused["payload"]["target"], refused["payload"]["depth"]) == ("emit", "ping", 9)
    assert refused["payload"]["path"][0] == "ping #1"


def test_emits_a_compute_committed_and_nobody_handed_over_are_stored_once_at_the_next_start(home: Path) -> None:
    """A compute's emits are committed with it; if its worker (or the kernel) dies after the COMMIT and before the
    kernel stored them, they are in the sense's _nerve_emits and nowhere else. The next start (and a lost
    compute) hands over what lies above the sense's mark: each once, a second start nothing more."""
    write_instance(home, """
        senses:
          fan: {group: fan}
          l: {group: listeners}
        reflexes:
          - {sense: fan, on: [go]}
          - {sense: l, on: [left]}
    """, {"fan": FAN})
    write_sense(home, "l", STORE, STORE_SCHEMA)
    assert generate_migration(home / "senses" / "l") is not None
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        for n in range(3):
            request(home, "emit", channel="go", payload={"n": n})
        wait_for(lambda: len(_got(home, "l")) >= 3, 30, what="the emits handed over as they were made")
        engine.stop()
    # the state a kill between the compute's COMMIT and the kernel's store leaves: a row only the sense has
    conn = sqlite3.connect(home / "data" / "senses" / "fan.db")
    with conn:
        conn.execute("INSERT INTO _nerve_emits (channel, payload, key, ts) VALUES ('left', ?, NULL, 1)",
                     (json.dumps({"n": 3, "side": "left"}),))
    conn.close()
    for _ in range(2):  # the first start stores it; the second finds nothing above the mark
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=2)
            wait_for(lambda: len(_got(home, "l")) >= 4, 30, what="the committed emit handed over at start")
            engine.stop()
    assert _got(home, "l") == [("left", n) for n in range(4)]
    assert len([r for r in read_logs(home, "signal", "emit") if r["ref"] == "left"]) == 4
