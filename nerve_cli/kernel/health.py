"""The built-in `nerve-health` sense (RFC §5.7): the engine watching itself.

It is engine code, so the kernel computes it in-process; otherwise it is a
sense like any other: scheduled by the same rules, its signals stored in
`data/senses/nerve-health.db` (`_signals`) and routed to reflexes that list it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

HEALTH_SENSE = "nerve-health"


class HealthStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " ts INTEGER NOT NULL, payload TEXT NOT NULL)"
        )
        self.conn.execute("CREATE INDEX IF NOT EXISTS idx__signals_ts ON _signals(ts)")

    def record(self, payload: dict[str, Any]) -> int:
        ts = time.time_ns() // 1_000_000
        self.conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (ts, orjson.dumps(payload).decode()))
        return ts

    def close(self) -> None:
        self.conn.close()


def rss_bytes(pids: list[int]) -> dict[int, int]:
    """Resident memory of each live pid (psutil; missing pids are skipped)."""
    import psutil

    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out
