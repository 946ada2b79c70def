"""The notifier as a part, in process: signals of nerve-threads and nerve-health in their real databases, apprise
posting to a loopback receiver, the outbox in data/notify.db. (tests/test_notify.py runs it inside the engine.)"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import orjson
from enginekit import free_port, wait_for
from test_notify import Receiver

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.notify.notifier import Notifier
from nerve_cli.store import links


def _sense_db(home: Path, name: str) -> sqlite3.Connection:
    path = home / "data" / "senses" / f"{name}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER, payload TEXT)")
    return conn


def _signal(conn: sqlite3.Connection, payload: dict) -> None:
    conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (int(time.time() * 1000), orjson.dumps(payload)))


def test_each_signal_is_told_once_to_each_target_and_a_failed_one_is_retried_until_it_arrives(tmp_path: Path) -> None:
    home = tmp_path
    up, later = free_port(), free_port()
    config = NerveConfig.model_validate({"notify": [
        {"name": "ops", "to": [f"json://127.0.0.1:{up}/a"], "on": ["waiting", "failed"], "workflows": ["ship"]},
        {"name": "pager", "to": [f"json://127.0.0.1:{later}/b"], "on": ["stale", "quarantined"], "retry_max": "1s"}]})
    threads, health = _sense_db(home, "nerve-threads"), _sense_db(home, "nerve-health")
    _signal(threads, {"run_id": "run-0", "workflow": "ship", "transition": "waiting", "question": "before"})
    lines: list[tuple[str, str]] = []
    receiver = Receiver(up)
    notifier = Notifier(home, lambda: config, lambda: None, lambda level, line: lines.append((level, line)))
    notifier.start()
    try:
        wait_for(lambda: notifier.passes >= 1, 10, what="the first look")  # a new notify.db starts at the ends
        _signal(threads, {"run_id": "run-1", "workflow": "ship", "transition": "waiting", "question": "Ship it?",
                          "waiting_for": {"kind": "person"}})
        _signal(threads, {"run_id": "run-2", "workflow": "other", "transition": "failed", "reason": "boom"})
        _signal(threads, {"run_id": "run-3", "workflow": "ship", "transition": "started"})
        _signal(threads, {"run_id": "run-4", "workflow": "ship", "transition": "failed", "reason": "role raised"})
        blocked = {"s": {"until": 1, "why": "crashed 5 times", "quarantined": True}}
        _signal(health, {"went_stale": ["cpu"], "stale": {"cpu": {"expected_every_s": 30}}, "blocked": blocked})
        _signal(health, {"went_stale": [], "blocked": blocked})  # still quarantined: not news
        notifier.wake()
        wait_for(lambda: len(receiver.bodies) == 2, 10, what="the two ops notifications")
        assert receiver.titles() == ["nerve: run-1 (ship) waits for a person", "nerve: run-4 (ship) failed"]
        assert "nerve thread approve|reject run-1" in receiver.bodies[0]["message"]  # no listener: no link
        wait_for(lambda: notifier.status()["pager"]["failed"] >= 2, 10, what="the pager's failed tries")
        assert notifier.status()["pager"]["pending"] == 2 and notifier.status()["pager"]["sent"] == 0
        assert [level for level, _ in lines] == ["warn", "warn"]  # told once per notification, not per retry
    finally:
        notifier.close()
    # another notifier on the same files (an engine restart): nothing is sent twice, the held ones go out
    pager = Receiver(later)
    again = Notifier(home, lambda: config, lambda: None, lambda level, line: None)
    again.start()
    try:
        wait_for(lambda: len(pager.bodies) == 2, 10, what="the held pager notifications")
        assert sorted(pager.titles()) == ["nerve: sense cpu is stale", "nerve: sense s is quarantined"]
        time.sleep(1.0)
        assert len(receiver.bodies) == 2 and len(pager.bodies) == 2
        assert {r: s["sent"] for r, s in again.status().items()} == {"ops": 2, "pager": 2}
    finally:
        again.close()
        receiver.close()
        pager.close()


def test_a_thread_asking_several_questions_is_sent_a_link_for_each(tmp_path: Path) -> None:
    port = free_port()
    config = NerveConfig.model_validate({"notify": [{"to": [f"json://127.0.0.1:{port}/a"], "answer_as": "oncall"}]})
    threads = _sense_db(tmp_path, "nerve-threads")
    receiver = Receiver(port)
    notifier = Notifier(tmp_path, lambda: config, lambda: "http://127.0.0.1:8788", lambda level, line: None)
    notifier.start()
    try:
        wait_for(lambda: notifier.passes >= 1, 10, what="the first look")
        wait = {"kind": "person", "questions": [{"id": "q1", "question": "a"}, {"id": "q2", "question": "b"}]}
        _signal(threads, {"run_id": "run-9", "workflow": "w", "transition": "waiting", "question": "2 questions",
                          "waiting_for": wait})
        notifier.wake()
        wait_for(lambda: len(receiver.bodies) == 1, 10, what="the notification")
    finally:
        notifier.close()
        receiver.close()
    message = receiver.bodies[0]["message"]
    urls = re.findall(r"(q\d): (http://127\.0\.0\.1:8788/answer/\S+)", message)
    assert [q for q, _ in urls] == ["q1", "q2"]
    claims = [links.verify(tmp_path, url.rsplit("/", 1)[1]) for _, url in urls]
    assert [(c.run_id, c.question, c.by) for c in claims] == [("run-9", "q1", "oncall"), ("run-9", "q2", "oncall")]


def test_a_notifier_with_nothing_to_send_looks_only_when_woken(tmp_path: Path) -> None:
    """No timer: with no rules (no notify.db), or rules and nothing due, the thread looks at its start and at each
    wake (a signal of its sources, a reload), never on its own."""
    port = free_port()
    rules: dict = {}
    notifier = Notifier(tmp_path, lambda: NerveConfig.model_validate(rules), lambda: None, lambda level, line: None)
    notifier.start()
    try:
        wait_for(lambda: notifier.looks >= 1, 10, what="the first look")
        time.sleep(2.5)
        assert (notifier.looks, notifier.passes) == (1, 0)  # nothing to look at: not even notify.db is made
        assert not (tmp_path / "data" / "notify.db").exists()
        rules = {"notify": [{"name": "ops", "to": [f"json://127.0.0.1:{port}/a"], "on": ["waiting"]}]}
        notifier.wake()  # a reload that added a rule
        wait_for(lambda: notifier.passes == 1, 10, what="the pass the reload asked for")
        time.sleep(2.5)
        assert (notifier.looks, notifier.passes) == (2, 1)  # a rule, nothing due: still only woken
        threads = _sense_db(tmp_path, "nerve-threads")
        _signal(threads, {"run_id": "run-1", "workflow": "ship", "transition": "waiting", "question": "Ship it?",
                          "waiting_for": {"kind": "person"}})
        receiver = Receiver(port)
        try:
            notifier.wake()  # what the router does when nerve-threads signals
            wait_for(lambda: len(receiver.bodies) == 1, 10, what="the notification")
        finally:
            receiver.close()
    finally:
        notifier.close()


def test_a_pass_that_fails_is_tried_again_without_a_wake(tmp_path: Path) -> None:
    """A damaged source file fails the look (told at each try; it ended the notifier's thread when it failed the
    outbox's opening); the notifier looks again a second later on its own, so once the file is whole again its
    pass runs with nothing waking it, and what is signalled after is sent."""
    port = free_port()
    config = NerveConfig.model_validate({"notify": [{"name": "ops", "to": [f"json://127.0.0.1:{port}/a"],
                                                     "on": ["waiting"]}]})
    threads_db = tmp_path / "data" / "senses" / "nerve-threads.db"
    threads_db.parent.mkdir(parents=True)
    threads_db.write_bytes(b"this is not a database" * 100)
    lines: list[tuple[str, str]] = []
    receiver = Receiver(port)
    notifier = Notifier(tmp_path, lambda: config, lambda: None, lambda level, line: lines.append((level, line)))
    try:
        notifier.start()
        wait_for(lambda: sum(level == "error" for level, _ in lines) >= 2, 10, what="a failed pass tried again")
        threads_db.unlink()
        threads = _sense_db(tmp_path, "nerve-threads")
        wait_for(lambda: notifier.passes == 1, 10, what="the pass once the file is whole, with no wake")
        assert notifier._thread is not None and notifier._thread.is_alive()
        _signal(threads, {"run_id": "run-1", "workflow": "ship", "transition": "waiting", "question": "Ship it?",
                          "waiting_for": {"kind": "person"}})
        notifier.wake()
        wait_for(lambda: len(receiver.bodies) == 1, 10, what="the notice signalled after")
    finally:
        notifier.close()
        receiver.close()
