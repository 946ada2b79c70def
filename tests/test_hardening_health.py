"""The built-in health sense cannot stall the kernel: its row is written off the event loop, and
the scheduler's timer is re-armed whatever a compute does."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from enginekit import RunningEngine, completes, errors, nerve, read_logs, wait_for, write_instance

CONFIG = """
    engine:
      health_interval: 200ms
    senses:
      fast: {}
    reflexes:
      - {sense: fast, interval: 50ms}
"""
RETURNS_1 = "def compute(db, peers):\n    return 1\n"


def test_health_compute_blocked_by_a_locked_health_db_does_not_stall_scheduling(home: Path) -> None:
    write_instance(home, CONFIG, {"fast": RETURNS_1})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "nerve-health")) >= 2, 15, what="health to run")
        holder = sqlite3.connect(home / "data" / "senses" / "nerve-health.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # a write lock held longer than SQLite's 5 s busy wait
        locked_at = time.time()
        try:
            before = len(completes(home, "fast"))
            # the kernel answers and keeps scheduling while nerve-health waits for the lock
            for _ in range(3):
                time.sleep(1.0)
                assert engine.status()["pid"] == engine.proc.pid
            assert len(completes(home, "fast")) >= before + 20, "fast stopped while nerve-health waited"
            wait_for(lambda: errors(home, "nerve-health"), 15, what="the health write to fail")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        failed = errors(home, "nerve-health")[0]["payload"]
        assert "database is locked" in failed["message"] and "nerve-health.db" in failed["message"]
        assert failed["error_type"] == "OperationalError"
        released = time.time()
        wait_for(lambda: any(c["ts"] / 1000 > released and c["payload"]["outcome"] == "signal"
                             for c in completes(home, "nerve-health")), 15, what="health to recover")
        before = len(completes(home, "fast"))
        wait_for(lambda: len(completes(home, "fast")) >= before + 10, 15, what="fast after the lock")
        code, output = engine.stop()
    assert code == 0, output
    assert time.time() - locked_at < 60


def test_health_compute_on_a_damaged_health_db_fails_at_start_with_the_fix(home: Path) -> None:
    write_instance(home, CONFIG, {"fast": RETURNS_1})
    path = home / "data" / "senses" / "nerve-health.db"
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, payload TEXT NOT NULL)")
    conn.executemany("INSERT INTO _signals (ts, payload) VALUES (?, ?)", [(i, "x" * 200) for i in range(20000)])
    conn.commit()
    conn.close()
    with open(path, "r+b") as handle:  # the header reads; pages deep inside do not
        for page in range(3, path.stat().st_size // 4096, 7):
            handle.seek(page * 4096)
            handle.write(os.urandom(4096))
    result = nerve("run", "--for", "5s", home=home, timeout=30)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{path} is damaged" in result.stderr and f"rm {path}" in result.stderr
    assert "engine pid=" not in result.stdout  # refused before it started, not after


def test_health_compute_timer_is_rearmed_when_the_health_row_cannot_be_written(home: Path) -> None:
    """Every health write fails (its table is gone and a trigger forbids recreating it): intervals still run."""
    write_instance(home, CONFIG, {"fast": RETURNS_1})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "nerve-health")) >= 1, 15)
        conn = sqlite3.connect(home / "data" / "senses" / "nerve-health.db", isolation_level=None)
        conn.execute("CREATE TRIGGER no_rows BEFORE INSERT ON _signals BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        conn.close()
        wait_for(lambda: len(errors(home, "nerve-health")) >= 3, 15, what="failing health computes")
        before = len(completes(home, "fast"))
        wait_for(lambda: len(completes(home, "fast")) >= before + 10, 15, what="fast to keep its interval")
        code, output = engine.stop()
    assert code == 0, output
    assert "disk full" in errors(home, "nerve-health")[0]["payload"]["message"]


def test_health_keeps_its_rhythm_after_reloads_that_change_a_reflex_and_add_a_sense(home: Path) -> None:
    """A reload re-reads which senses a worker can take; nerve-health has no worker and must not wait for one."""
    config = "engine: {health_interval: 200ms}\nsenses:\n  a: {}\nreflexes:\n  - {sense: a, interval: 1h}\n"
    write_instance(home, config, {"a": RETURNS_1})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for step, text in enumerate((config.replace("1h", "2h"),
                                     config.replace("  a: {}\n", "  a: {}\n  b: {}\n").replace("1h", "2h"))):
            (home / "nerve.yaml").write_text(text)
            wait_for(lambda: len(read_logs(home, "system", "config_reloaded")) > step, 20, what="the reload")
            runs = len(completes(home, "nerve-health"))
            wait_for(lambda: len(completes(home, "nerve-health")) >= runs + 3, 10, what="nerve-health to run on")
        code, output = engine.stop()
    assert code == 0, output
