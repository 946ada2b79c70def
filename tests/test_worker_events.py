"""The third parameter: a real worker reads a compute's events inside its transaction (worker.events)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sensekit import db_rows, worker, write_instance

from nerve_cli.store.events import EventStore, store_event
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab.reasons import BACKLOG, DEMAND, INTERVAL, Reason
from nerve_cli.wire.protocol import MAX_PAYLOAD, Compute, Error, Signal, Silent
from nerve_cli.worker import events as worker_events

SEEN_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="n")
class Seen:
    n: int
    source: str
    event_id: int
    payload: str
"""
SEEN_SQL = ("CREATE TABLE seen (n INTEGER PRIMARY KEY, source TEXT NOT NULL, event_id INTEGER NOT NULL, "
            "payload TEXT NOT NULL);\n")

# Stores every event; what it returns is chosen by the first event's payload, so one sense shows every outcome.
LISTENER = """
import json
from nerve_cli.sdk import KEEP
from .schema import Seen

def compute(db, peers, trigger):
    rows = db.query("SELECT count(*) AS c FROM seen")[0]["c"]
    for i, e in enumerate(trigger.events):
        db.insert(Seen(n=rows + i, source=e.source, event_id=e.id, payload=json.dumps(e.payload)))
    first = trigger.events[0].payload if trigger.events else None
    if first == "raise":
        raise RuntimeError("refused")
    if first == "none":
        return None
    if first == "keep":
        return KEEP
    return {"reason": trigger.reason, "source": trigger.source, "ids": [e.id for e in trigger.events],
            "payloads": [e.payload for e in trigger.events], "kinds": sorted({e.kind for e in trigger.events}),
            "more": trigger.more, "sources": list(trigger.sources)}
"""


def listener_instance(home: Path, code: str = LISTENER, **extra) -> Path:
    return write_instance(home, {"listener": {"code": code, "schema": SEEN_SCHEMA, "migration": SEEN_SQL}, **extra},
                          reflexes=[{"sense": "listener", "on": ["task.created"]}])


def emit(home: Path, payload, channel: str = "task.created") -> int:
    return store_event(home / "data" / "events.db", channel, payload).id


ON_TASK = Reason.signal("task.created")


def compute(client, reason: Reason = ON_TASK, sources: dict | None = None):
    cid = client.next_id()
    client.send(Compute(cid, "listener", reason, {"task.created": "channel"} if sources is None else sources))
    return client.answer(cid, timeout=20)


def cursors(home: Path) -> dict:
    return dict(db_rows(home, "listener", "SELECT source, last_id FROM _nerve_cursors"))


def test_a_compute_receives_its_events_in_order_and_never_twice(home: Path) -> None:
    listener_instance(home)
    ids = [emit(home, {"id": i}) for i in range(5)]
    emit(home, {"other": True}, channel="elsewhere")  # not a source: never delivered
    with worker(home) as client:
        first = compute(client)
        assert isinstance(first, Signal)
        assert first.payload["ids"] == ids and first.payload["payloads"] == [{"id": i} for i in range(5)]
        assert first.payload["reason"] == "signal" and first.payload["source"] == "task.created"
        assert first.payload["kinds"] == ["channel"] and first.payload["more"] is False
        assert (first.events, first.more) == (5, False)
        again = compute(client, reason=INTERVAL)
        assert again.payload["ids"] == [] and again.payload["reason"] == "interval"
        later = emit(home, {"id": 5})
        assert compute(client).payload["ids"] == [later]
    assert cursors(home) == {"task.created": later}
    assert db_rows(home, "listener", "SELECT event_id FROM seen ORDER BY n") == [(i,) for i in ids + [later]]


def test_a_raising_compute_gets_the_same_events_again(home: Path) -> None:
    listener_instance(home)
    bad = emit(home, "raise")
    with worker(home) as client:
        failed = compute(client)
        assert isinstance(failed, Error) and "refused" in failed.error.message
        assert cursors(home) == {} and db_rows(home, "listener", "SELECT count(*) FROM seen") == [(0,)]
        good = emit(home, {"id": 2})
        assert isinstance(compute(client), Error)  # the same first event again, plus the new one
    # fixed code receives both, in order
    (home / "senses" / "listener" / "sense.py").write_text(LISTENER.replace('first == "raise"', "False"))
    with worker(home) as client:
        fixed = compute(client)
        assert fixed.payload["ids"] == [bad, good]
    assert cursors(home) == {"task.created": good}


def test_none_rolls_back_the_rows_but_consumes_the_events(home: Path) -> None:
    listener_instance(home)
    looked_at = [emit(home, "none"), emit(home, {"id": 1})]
    with worker(home) as client:
        answer = compute(client)
        assert isinstance(answer, Silent) and not answer.kept and answer.events == 2
        assert db_rows(home, "listener", "SELECT count(*) FROM seen") == [(0,)]  # None stores nothing
        assert cursors(home) == {"task.created": looked_at[-1]}  # …but the events do not come back
        assert compute(client).payload["ids"] == []


def test_keep_commits_the_rows_without_a_signal(home: Path) -> None:
    listener_instance(home)
    emit(home, "keep")
    with worker(home) as client:
        answer = compute(client)
    assert isinstance(answer, Silent) and answer.kept and answer.events == 1
    assert db_rows(home, "listener", "SELECT count(*) FROM seen") == [(1,)]
    assert db_rows(home, "listener", "SELECT count(*) FROM _signals") == [(0,)]


def test_a_sense_source_delivers_the_signal_payloads(home: Path) -> None:
    upstream = "def compute(db, peers):\n    return {'n': db.query('SELECT count(*) AS c FROM _signals')[0]['c']}\n"
    write_instance(home, {"up": {"code": upstream, "schema": None, "migration": None},
                          "listener": {"code": LISTENER, "schema": SEEN_SCHEMA, "migration": SEEN_SQL}},
                   reflexes=[{"sense": "listener", "on": ["up"]}])
    with worker(home) as client:
        for _ in range(3):
            cid = client.next_id()
            client.send(Compute(cid, "up", DEMAND))
            assert isinstance(client.answer(cid, timeout=20), Signal)
        got = compute(client, reason=Reason.signal("up"), sources={"up": "sense"})
    assert got.payload["payloads"] == [{"n": 0}, {"n": 1}, {"n": 2}] and got.payload["kinds"] == ["sense"]
    assert got.payload["ids"] == [1, 2, 3] and got.payload["sources"] == ["up"]


def test_two_arguments_read_no_events_and_write_no_cursor(home: Path) -> None:
    plain = "def compute(db, peers):\n    return 1\n"
    write_instance(home, {"listener": {"code": plain, "schema": None, "migration": None}},
                   reflexes=[{"sense": "listener", "on": ["task.created"]}])
    emit(home, {"id": 1})
    with worker(home) as client:
        assert client.ready.takes_trigger == []
        answer = compute(client)
    assert isinstance(answer, Signal) and answer.events == 0
    assert cursors(home) == {}


def test_a_long_backlog_comes_in_batches(home: Path) -> None:
    listener_instance(home)
    store = EventStore(home / "data" / "events.db")
    store.append([("task.created", str(i), None, None) for i in range(worker_events.MAX_EVENTS + 3)])
    store.close()
    with worker(home) as client:
        first = compute(client)
        assert len(first.payload["ids"]) == worker_events.MAX_EVENTS and first.more and first.payload["more"]
        rest = compute(client, reason=BACKLOG)
    assert rest.payload["payloads"] == [worker_events.MAX_EVENTS, worker_events.MAX_EVENTS + 1, worker_events.MAX_EVENTS + 2]
    assert rest.payload["reason"] == "backlog" and not rest.more


def test_an_oversized_signal_payload_is_refused_before_commit(home: Path) -> None:
    big = f"def compute(db, peers):\n    db.execute(\"INSERT INTO sample VALUES (1, 1.0)\")\n    return 'x' * {MAX_PAYLOAD + 1}\n"
    write_instance(home, {"big": {"code": big}})
    with worker(home) as client:
        cid = client.next_id()
        client.send(Compute(cid, "big", DEMAND))
        answer = client.answer(cid, timeout=20)
    assert isinstance(answer, Error) and answer.error.type == "PayloadTooLarge"
    assert f"({MAX_PAYLOAD + 3:,} bytes)" in answer.error.message and "at most 16,711,680 bytes" in answer.error.message
    assert answer.error.file == "senses/big/sense.py"
    assert db_rows(home, "big", "SELECT count(*) FROM _signals") == [(0,)]
    assert db_rows(home, "big", "SELECT count(*) FROM sample") == [(0,)]


def test_the_log_handle_reads_and_cannot_write(home: Path) -> None:
    code = """
    def compute(db, peers, trigger):
        rows = trigger.log.query(source="system", type="error")
        try:  # the handle's connections are read-only at the SQLite level
            import sqlite3
            from nerve_cli.store.logs import open_readonly
            conn = open_readonly(trigger.log.layout.logs_db)
            conn.execute("DELETE FROM logs")
            wrote = True
        except sqlite3.OperationalError:
            wrote = False
        return {"messages": [r["payload"]["message"] for r in rows], "wrote": wrote,
                "methods": sorted(m for m in dir(trigger.log) if not m.startswith("_"))}
    """
    write_instance(home, {"reader": {"code": code, "schema": None, "migration": None}})
    with LogStore(home / "data" / "logs.db") as logs:
        logs.append("system", "error", "x", {"message": "disk full"})
        logs.append("reflex", "run_start", "x", {"compute_id": 1})
    with worker(home) as client:
        cid = client.next_id()
        client.send(Compute(cid, "reader", DEMAND))
        answer = client.answer(cid, timeout=20)
    assert isinstance(answer, Signal), answer
    assert answer.payload == {"messages": ["disk full"], "wrote": False, "methods": ["layout", "query", "runs", "thread"]}


def test_the_log_handle_reaches_archived_days_and_reads_threads(home: Path) -> None:
    code = """
    def compute(db, peers, trigger):
        errors = lambda **since: [r["payload"]["message"] for r in trigger.log.query(source="system", type="error", **since)]
        return {"hot": errors(), "with_archive": errors(since="30d"), "runs": [(r["run_id"], r["status"]) for r in trigger.log.runs()],
                "thread": [r["type"] for r in trigger.log.thread("run-1")]}
    """
    write_instance(home, {"reader": {"code": code, "schema": None, "migration": None}})
    now = int(time.time() * 1000)
    with LogStore(home / "data" / "logs.db") as logs:
        logs.append("system", "error", "x", {"message": "ten days ago"}, ts=now - 10 * 86_400_000)
        logs.append("system", "error", "x", {"message": "today"}, ts=now)
        logs.workflow_event("run-1", "review", "queued", {}, ts=now)
        logs.workflow_event("run-1", "review", "completed", {}, ts=now + 1)
    archived = subprocess.run([sys.executable, "-m", "nerve_cli", "archive", "--older-than", "5d", "--home", str(home)],
                              capture_output=True, text=True, timeout=60)
    assert archived.returncode == 0, archived.stderr
    assert list((home / "data" / "archive" / "logs").glob("*.jsonl*"))  # the old row left logs.db
    with worker(home) as client:
        cid = client.next_id()
        client.send(Compute(cid, "reader", DEMAND))
        answer = client.answer(cid, timeout=20)
    assert isinstance(answer, Signal), answer
    assert answer.payload == {"hot": ["today"], "with_archive": ["ten days ago", "today"],
                              "runs": [["run-1", "completed"]], "thread": ["queued", "completed"]}


def test_an_async_compute_receives_its_events_too(home: Path) -> None:
    code = "async def compute(db, peers, trigger):\n    return [e.payload for e in trigger.events]\n"
    write_instance(home, {"listener": {"code": code, "schema": None, "migration": None}},
                   reflexes=[{"sense": "listener", "on": ["task.created"]}])
    emit(home, 1)
    emit(home, 2)
    with worker(home) as client:
        assert client.ready.takes_trigger == ["listener"]
        assert compute(client).payload == [1, 2]
        assert compute(client).payload == []


def test_a_recreated_source_database_is_read_from_its_new_first_event(home: Path) -> None:
    upstream = "def compute(db, peers):\n    return db.query('SELECT count(*) AS c FROM _signals')[0]['c']\n"
    write_instance(home, {"up": {"code": upstream, "schema": None, "migration": None},
                          "listener": {"code": LISTENER, "schema": SEEN_SCHEMA, "migration": SEEN_SQL}},
                   reflexes=[{"sense": "listener", "on": ["up"]}])

    def run(client, sense: str, times: int = 1):
        for _ in range(times):
            cid = client.next_id()
            client.send(Compute(cid, sense, Reason.signal("up") if sense == "listener" else DEMAND,
                                {"up": "sense"} if sense == "listener" else None))
            answer = client.answer(cid, timeout=20)
        return answer

    with worker(home) as client:
        run(client, "up", 3)
        assert run(client, "listener").payload["ids"] == [1, 2, 3]
    for path in (home / "data" / "senses").glob("up.db*"):
        path.unlink()  # "a sense database is derived data": deleted, rebuilt, its ids start again
    with worker(home) as client:
        run(client, "up", 2)
        assert run(client, "listener").payload["payloads"] == [0, 1]
