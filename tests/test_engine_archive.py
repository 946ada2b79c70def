"""The engine archives old rows by itself at start-up (and daily)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli.store.logs import LogStore


def test_engine_archives_rows_older_than_archive_after(home: Path) -> None:
    write_instance(home, "engine: {archive_after: 2d}\nsenses:\n  a: {}\n", {"a": "def compute(db, peers):\n    return 1\n"})
    old = int((time.time() - 5 * 86400) * 1000)
    store = LogStore(home / "data" / "logs.db")
    for i in range(10):
        store.append("system", "note", None, {"i": i}, ts=old + i)
    store.close()
    with RunningEngine(home) as engine:
        done = wait_for(lambda: read_logs(home, "system", "archived"), 15, what="the archive job")
        assert done[0]["payload"]["rows"] == 10
        engine.stop()
    files = list((home / "data" / "archive" / "logs").glob("*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == 10
    conn = sqlite3.connect(home / "data" / "logs.db")
    assert conn.execute("SELECT count(*) FROM logs WHERE type = 'note'").fetchone()[0] == 0
