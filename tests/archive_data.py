"""Generated history for the archive tests: logs.db and a sense db, plus an exactly-once census."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from loadclock import scaled

from nerve_cli.home import Layout
from nerve_cli.store.jsonl import iter_lines
from nerve_cli.store.logs import LogStore, dumps, log_row

DAY = 86_400_000
HOUR = 3_600_000

SENSE_SCHEMA = """
CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, payload TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx__signals_ts ON _signals(ts);
CREATE TABLE IF NOT EXISTS _nerve_archive (table_name TEXT PRIMARY KEY, time_column TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sample (ts INTEGER PRIMARY KEY, value REAL NOT NULL, note TEXT, raw BLOB);
CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT);
INSERT OR REPLACE INTO _nerve_archive VALUES ('sample', 'ts');
"""


def day_ms(day_index: int) -> int:
    return day_index * DAY


def make_logs(layout: Layout, first_day: int, days: int, per_day: int) -> None:
    """`per_day` rows per day, spread over each day, several sources/types, via executemany."""
    LogStore(layout.logs_db).close()
    conn = sqlite3.connect(layout.logs_db)
    rows = []
    for d in range(first_day, first_day + days):
        step = DAY // per_day
        for i in range(per_day):
            ts = day_ms(d) + i * step + 7
            kind = i % 3
            if kind == 0:
                rows.append(("reflex", "run_complete", "cpu", dumps({"outcome": "signal", "i": i}), ts))
            elif kind == 1:
                rows.append(("system", "worker_started", None, dumps({"pid": i, "ünïcode": "✓"}), ts))
            else:
                rows.append(("signal", "emit", "chan", None, ts))
    conn.executemany("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


def add_thread(layout: Layout, run_id: str, status: str, ts_list: list[int], workflow: str = "review") -> None:
    """Log rows of a thread at the given times, with workflow_runs left at `status`."""
    store = LogStore(layout.logs_db)
    for n, ts in enumerate(ts_list):
        store.workflow_event(run_id, workflow, "queued" if n == 0 else "message", {"seq": n}, ts=ts)
    store.workflow_event(run_id, workflow, status, {}, ts=ts_list[-1] + 1)
    store.close()


def make_sense(layout: Layout, name: str, first_day: int, days: int, per_day: int) -> Path:
    layout.sense_data.mkdir(parents=True, exist_ok=True)
    path = layout.sense_db(name)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SENSE_SCHEMA)
    sig, samples = [], []
    for d in range(first_day, first_day + days):
        for i in range(per_day):
            ts = day_ms(d) + i * (DAY // per_day) + 3
            sig.append((ts, dumps({"value": i / 3})))
            samples.append((ts, i * 1.5, "n" if i % 2 else None, bytes([i % 256, 0, 255])))
    conn.executemany("INSERT INTO _signals (ts, payload) VALUES (?, ?)", sig)
    conn.executemany("INSERT INTO sample VALUES (?, ?, ?, ?)", samples)
    conn.execute("INSERT OR REPLACE INTO config VALUES ('k', 'v')")
    conn.commit()
    conn.close()
    return path


def census(layout: Layout, name: str | None = None) -> dict[str, Counter]:
    """How many times each row identity occurs across database + JSONL files, per database."""
    out: dict[str, Counter] = {}
    logs: Counter = Counter()
    if layout.logs_db.exists():
        conn = sqlite3.connect(layout.logs_db)
        for row in conn.execute("SELECT id, source, type, ref_id, payload, ts FROM logs"):
            logs[_log_key(log_row(row))] += 1
        conn.close()
    for path in sorted((layout.archive / "logs").glob("*.jsonl")):
        for line in iter_lines(path):
            logs[_log_key(line)] += 1
    out["logs"] = logs
    names = [name] if name else [p.stem for p in sorted(layout.sense_data.glob("*.db"))]
    for sense in names:
        c: Counter = Counter()
        conn = sqlite3.connect(layout.sense_db(sense))
        for id_, ts, payload in conn.execute("SELECT id, ts, payload FROM _signals"):
            c[("_signals", id_, ts, _canonical(payload, decoded=False))] += 1
        for row in conn.execute("SELECT ts, value, note, raw FROM sample"):
            c[("sample", row[0], row[1], row[2], row[3].hex())] += 1
        conn.close()
        for path in sorted((layout.archive / "senses" / sense).glob("*.jsonl")):
            for line in iter_lines(path):
                r = line["row"]
                if line["table"] == "_signals":  # archived payloads are decoded, as `sense show` shows them
                    assert line.get("decoded") == ["payload"], line
                    c[("_signals", r["id"], r["ts"], _canonical(r["payload"], decoded=True))] += 1
                else:
                    import base64

                    raw = base64.b64decode(r["raw"]["$base64"]).hex()
                    c[("sample", r["ts"], r["value"], r["note"], raw)] += 1
        out[sense] = c
    return out


def _canonical(payload, *, decoded: bool) -> bytes:
    import orjson

    return orjson.dumps(payload if decoded else orjson.loads(payload), option=orjson.OPT_SORT_KEYS)


def _log_key(row: dict) -> tuple:
    import orjson

    return (row["id"], row["source"], row["type"], row["ref_id"], orjson.dumps(row["payload"]), row["ts"])


def db_count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def meta(path: Path, key: str, table: str = "meta") -> str | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(f"SELECT value FROM {table} WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def _archive_child(home: str, now_ms: int, crash_at: int | None) -> None:
    """The archiver in a process forked from a warm fork server: a crash point kills it with SIGKILL."""
    import os
    import sys

    from nerve_cli.store.archive import CRASH_ENV, archive

    os.environ.pop(CRASH_ENV, None)
    if crash_at:
        os.environ[CRASH_ENV] = str(crash_at)
    report = archive(Path(home), older_than_s=86400, now_ms=now_ms)
    sys.stdout.flush()
    os._exit(0 if report.ok else 3)


def run_archiver(home: Path, now_ms: int, crash_at: int | None = None, timeout: float = 60.0) -> int:
    """Archive `home` in a child process; its exit code (-9 when a crash point killed it).

    The child is forked from a fork server that imported the archiver once, so
    a run costs a fork, not an interpreter start and its imports: the crash
    tests run the archiver a hundred times, and on a loaded machine those
    start-ups were what ran past the test's timeout.
    """
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["archive_data", "nerve_cli.store.archive"])
    child = context.Process(target=_archive_child, args=(str(home), now_ms, crash_at))
    child.start()
    child.join(scaled(timeout))
    if child.exitcode is None:
        child.kill()
        child.join()
        raise AssertionError(f"the archiver did not finish within {timeout:g}s")
    return child.exitcode
