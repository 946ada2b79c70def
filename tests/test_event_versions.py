"""Events carry the schema version their emitter names, and a content hash when it asks for one."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, last_signal, read_logs, wait_for, write_instance

CONFIG = """
    senses:
      listener: {}
    reflexes:
      - {sense: listener, on: [task.created]}
"""
LISTENER = """
def compute(db, peers, trigger):
    return [[e.id, e.schema_version, e.hash] for e in trigger.events]
"""
PAYLOAD = {"title": "Straße", "id": 7, "tags": ["a", "b"]}


def canonical_hash(payload) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_offline_and_through_the_engine_an_event_keeps_its_version_and_hash(home: Path) -> None:
    write_instance(home, CONFIG, {"listener": LISTENER})
    old = home / "data" / "events.db"  # an events.db from before events had versions, with one event in it
    old.parent.mkdir(parents=True)
    conn = sqlite3.connect(old)
    conn.executescript("CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, "
                       "payload TEXT, ts INTEGER NOT NULL, key TEXT);"
                       "INSERT INTO events (channel, payload, ts) VALUES ('task.created', '1', 0);")
    conn.close()
    computed = json.loads(cli("sense", "compute", "listener", "--json").stdout)
    assert computed["payload"] == [[1, None, None]]  # read before any writer of this version touched the file

    sent = json.loads(cli("emit", "task.created", json.dumps(PAYLOAD), "--schema-version", "v1.0", "--hash",
                            "--json").stdout)
    assert sent["schema_version"] == "v1.0" and sent["hash"] == canonical_hash(PAYLOAD)
    plain = json.loads(cli("emit", "task.created", "2", "--json").stdout)
    assert plain["schema_version"] is None and plain["hash"] is None
    with RunningEngine(home) as engine:
        engine.wait_ready()  # the backlog of two is delivered at the start
        wait_for(lambda: last_signal(home, "listener") == [[2, "v1.0", sent["hash"]], [3, None, None]], 15,
                 what="the listener to receive both offline events")
        live = cli("emit", "task.created", json.dumps(PAYLOAD), "--schema-version", "2", "--hash")
        assert live.exit_code == 0 and f"({canonical_hash(PAYLOAD)})" in live.stdout, live.stdout
        wait_for(lambda: last_signal(home, "listener") == [[4, "2", canonical_hash(PAYLOAD)]], 15,
                 what="the listener to receive the live event")
        engine.stop()
    emits = {r["payload"]["event_id"]: r["payload"] for r in read_logs(home, "signal", "emit")}
    assert emits[4]["schema_version"] == "2" and emits[4]["hash"] == canonical_hash(PAYLOAD)
    assert "schema_version" not in emits[3] and emits[2]["schema_version"] == "v1.0"
    conn = sqlite3.connect(old)
    assert conn.execute("SELECT schema_version, hash FROM events_view WHERE id = 4").fetchone() == (
        "2", canonical_hash(PAYLOAD))
    conn.close()


def test_a_schema_version_with_spaces_is_a_usage_error_and_nothing_is_stored(home: Path) -> None:
    write_instance(home, CONFIG, {"listener": LISTENER})
    bad = cli("emit", "task.created", "1", "--schema-version", "one two")
    assert bad.exit_code == 2 and "schema version" in bad.output
    assert not (home / "data" / "events.db").exists()


SIGNALS_CONFIG = """
    senses:
      tasks: {signal_version: "2", signal_hash: true}
      plain: {}
      listener: {}
    reflexes:
      - {sense: listener, on: [tasks, plain]}
"""
SIGNALLER = """
def compute(db, peers):
    return {"title": "Straße", "id": 7, "tags": ["a", "b"]}
"""
SIGNALS_LISTENER = """
def compute(db, peers, trigger):
    return [[e.source, e.id, e.schema_version, e.hash] for e in trigger.events]
"""


def test_a_sense_whose_settings_ask_signals_with_a_version_and_hash_and_an_older_database_reads_as_before(
        home: Path) -> None:
    write_instance(home, SIGNALS_CONFIG, {"tasks": SIGNALLER, "plain": SIGNALLER, "listener": SIGNALS_LISTENER})
    # a database from before signals carried versions: its old signal reads with neither, and it keeps working
    (home / "data/senses").mkdir(parents=True, exist_ok=True)
    old = sqlite3.connect(home / "data/senses/tasks.db")
    old.execute("CREATE TABLE _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, payload TEXT NOT NULL)")
    old.execute("INSERT INTO _signals (ts, payload) VALUES (1, '{\"id\": 1}')")
    old.commit()
    old.close()
    first = json.loads(cli("sense", "compute", "listener", "--json").stdout)
    assert first["payload"] == [["tasks", 1, None, None]], first

    for sense in ("tasks", "plain"):
        done = cli("sense", "compute", sense, "--json")
        assert done.exit_code == 0, done.stdout
    second = json.loads(cli("sense", "compute", "listener", "--json").stdout)
    assert second["payload"] == [["tasks", 2, "2", canonical_hash(PAYLOAD)], ["plain", 1, None, None]], second

    bad = home / "nerve.yaml"
    bad.write_text(bad.read_text().replace('signal_version: "2"', 'signal_version: "two words"'))
    check = json.loads(cli("config", "check", "--json").stdout)
    assert any(p["path"] == "senses.tasks.signal_version" and "without spaces" in p["message"]
               for p in check["problems"]), check["problems"]
