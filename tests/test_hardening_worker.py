"""Hostile sense code against the worker: fd 0 closed or read, a payload too big, children left behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from enginekit import RunningEngine, errors, last_signal, read_logs, wait_for, write_instance, write_sense

from nerve_cli.ops.client import request


def signal_count(home: Path, sense: str) -> int:
    path = home / "data" / "senses" / f"{sense}.db"
    if not path.exists():
        return 0
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM _signals").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


FD0_CONFIG = """
    senses:
      closer: {group: g1, timeout: 5s}
      buddy: {group: g1, timeout: 5s}
      reader: {group: g2, timeout: 5s}
      pal: {group: g2, timeout: 5s}
    reflexes:
      - {sense: closer, interval: 100ms}
      - {sense: buddy, interval: 100ms}
      - {sense: reader, interval: 100ms}
      - {sense: pal, interval: 100ms}
"""
CLOSER = """
import os

def compute(db, peers):
    try:
        os.close(0)
    except OSError:
        pass
    return "closed"
"""
READER = """
import os, sys

def compute(db, peers):
    return len(os.read(0, 65536)) + len(sys.stdin.read())
"""


def test_worker_protocol_fds_survive_a_sense_closing_or_reading_fd0(home: Path) -> None:
    ok = "def compute(db, peers):\n    return 'ok'\n"
    write_instance(home, FD0_CONFIG, {"closer": CLOSER, "buddy": ok, "reader": READER, "pal": ok})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        for sense in ("closer", "buddy", "reader", "pal"):
            wait_for(lambda: signal_count(home, sense) >= 5, 15, what=f"{sense} to keep signalling")
        assert last_signal(home, "reader") == 0  # fd 0 is /dev/null: nothing of the kernel's to read
        workers = engine.status()["workers"]
        code, output = engine.stop()
    assert code == 0, output
    assert errors(home) == [], errors(home)
    assert [(w["restarts"], w["state"]) for w in workers] == [(0, "ready"), (0, "ready")]


BIG_CONFIG = """
    senses:
      big: {group: g}
      small: {group: g}
    reflexes:
      - {sense: small, interval: 1h}
"""
BIG = """
def compute(db, peers):
    db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    return "x" * (17 * 2**20)
"""


def test_payload_over_16mib_is_an_error_before_commit_and_nothing_is_stored(home: Path) -> None:
    write_instance(home, BIG_CONFIG, {"big": BIG, "small": "def compute(db, peers):\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        answer = request(home, "compute", sense="big", timeout=30)
        assert answer["outcome"] == "error", answer
        error = answer["error"]  # the compute's error in full: type, message, file, line, traceback
        assert error["type"] == "PayloadTooLarge"
        assert "17.0 MiB of JSON" in error["message"] and "db.blobs" in error["message"]
        assert request(home, "compute", sense="small", timeout=30)["outcome"] == "signal"
        worker = engine.status()["workers"][0]
        code, output = engine.stop()
    assert code == 0, output
    assert worker["restarts"] == 0
    assert signal_count(home, "big") == 0
    conn = sqlite3.connect(home / "data" / "senses" / "big.db")
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchone() is None  # rolled back
    assert read_logs(home, "system", "malformed") == []
    error = errors(home, "big")[0]["payload"]
    assert error["error_type"] == "PayloadTooLarge" and error["file"] == "senses/big/sense.py"


SPAWNER = """
import subprocess

def compute(db, peers):
    return subprocess.Popen(["sleep", "600"]).pid
"""


def test_worker_children_die_with_their_process_group_on_respawn_and_on_stop(home: Path) -> None:
    config = "senses:\n  spawner: {}\nreflexes:\n  - {sense: spawner, interval: 100ms}\n"
    write_instance(home, config, {"spawner": SPAWNER})
    pids: set[int] = set()

    def children(count: int) -> bool:
        pids.update(s for s in (last_signal(home, "spawner"),) if isinstance(s, int))
        return len(pids) >= count

    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: children(3), 15, what="three children")
        first = set(pids)
        write_sense(home, "spawner", SPAWNER + "# edited\n")  # the group's worker is replaced
        wait_for(lambda: read_logs(home, "system", "sense_reloaded"), 15, what="the reload")
        wait_for(lambda: not any(alive(p) for p in first), 15, what="the old worker's children to die")
        wait_for(lambda: len(pids - first) >= 2 or not children(len(first) + 2), 15)
        wait_for(lambda: children(len(first) + 2), 15, what="the new worker's children")
        code, output = engine.stop()
    assert code == 0, output
    wait_for(lambda: not any(alive(p) for p in pids), 10, what="every child to die with the engine")
