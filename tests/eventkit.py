"""Send events to a running engine the way a tight-looped script would, and read what listeners stored."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

from enginekit import wait_for
from loadclock import IdleClock

from nerve_cli.kernel.control.server import IDLE_TIMEOUT

STORE_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="n")
class Got:
    n: int
    event_id: int
    payload: str
"""

# Stores each event it receives, one row per event, numbered in arrival order.
STORE = """
import json, time
from .schema import Got

def compute(db, peers, trigger):
    time.sleep(SLOW)
    n = db.query("SELECT count(*) AS c FROM got")[0]["c"]
    for i, e in enumerate(trigger.events):
        db.insert(Got(n=n + i, event_id=e.id, payload=json.dumps(e.payload)))
    return {"events": len(trigger.events), "reason": trigger.reason}
"""


def store_sense(slow: float = 0.0) -> str:
    return STORE.replace("SLOW", repr(slow))


class Emitter:
    """One control-socket connection; `emit` returns only once the engine acknowledged (committed) the event.

    With `retry`, a refused or broken connection (engine killed or restarting)
    is retried until `deadline`, with the same key, so an event whose answer was
    lost is not stored twice.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / "data" / "nerve.sock"
        self.sock: socket.socket | None = None
        self.buf = b""
        self.acked: list[dict] = []
        self.used_at = 0.0

    def _connect(self) -> socket.socket:
        # the engine closes a connection idle for IDLE_TIMEOUT: one kept across slow tests (a module's fixture on
        # a loaded machine) would meet a broken pipe at its next request, so it is opened again before that
        if self.sock is not None and time.monotonic() - self.used_at > IDLE_TIMEOUT / 2:
            self.close()
        self.used_at = time.monotonic()
        if self.sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(str(self.path))
            self.sock, self.buf = sock, b""
        return self.sock

    def request(self, body: dict) -> dict:
        return self.send_line(json.dumps(body).encode() + b"\n")

    def send_line(self, line: bytes) -> dict:
        """One request exactly as given (already encoded, ending in a newline); the engine's answer."""
        sock = self._connect()
        sock.sendall(line)
        while b"\n" not in self.buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("engine closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def emit(self, channel: str, payload: Any, key: str | None = None, *, retry_for: float = 0.0) -> dict:
        clock = IdleClock(retry_for)  # idle-machine seconds (loadclock)
        while True:
            try:
                answer = self.request({"op": "emit", "channel": channel, "payload": payload, "key": key})
                if answer.get("ok"):
                    self.acked.append(answer)
                return answer
            except (OSError, ConnectionError, ValueError):
                self.close()
                if clock.expired():
                    raise
                time.sleep(0.02)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def got(home: Path, sense: str) -> list[tuple[int, int, Any]]:
    """(n, event_id, payload) rows a store sense kept, in order."""
    path = home / "data" / "senses" / f"{sense}.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT n, event_id, payload FROM got ORDER BY n").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [(n, i, json.loads(p)) for n, i, p in rows]


def events_db(home: Path, sql: str = "SELECT id, channel, payload, key FROM events ORDER BY id") -> list[tuple]:
    path = home / "data" / "events.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def worker_pid(engine, group: str) -> int | None:
    try:
        workers = engine.status()["workers"]
    except Exception:
        return None
    for w in workers:
        if w["group"] == group and w["state"] == "ready":
            return w["pid"]
    return None


def kill_workers(engine, group: str, times: int, rng) -> None:
    """`kill -9` `group`'s worker `times` times, each at a random moment up to 0.15 s after it is ready, waiting
    for its respawn after each."""
    kills = 0
    while kills < times:
        pid = wait_for(lambda: worker_pid(engine, group), 10, what=f"{group}'s worker")
        time.sleep(rng.uniform(0.0, 0.15))
        try:
            os.kill(pid, signal.SIGKILL)
            kills += 1
        except ProcessLookupError:
            pass
        wait_for(lambda: worker_pid(engine, group) not in (None, pid), 10, what="a respawn")
