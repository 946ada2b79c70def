"""Archive throughput and memory: 1,000,000 log rows over 30 days → JSONL, in a child process.

Prints rows/second of `archive()` beside its floor from the same run: the same
rows written as JSONL by a bare loop (one cursor over logs.db in id order, one
orjson line per row into one file; goal: the archive ≥ 50% of that loop's
rows/s). The loop runs just before and just after the archive (on a copy of the
same logs.db) and the floor is their mean, so a load that changes during the run
weighs on both sides; the CPU seconds of each are printed too (on a loaded
machine most of the wall time is waiting for a core). Then the peak RSS of the archiving process
beside the peak RSS of a bare python importing the same modules (the floor):
the archiver streams rows from a cursor into the file, so its peak stays
close to the floor instead of growing with the size of a day.

    .venv/bin/python bench/archive.py [--rows 1000000] [--days 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import goal

DAY = 86_400_000
FIRST_DAY = 20_000  # 2024-10-04

FLOOR = (
    "import resource, json; import nerve_cli.store.archive, nerve_cli.store.logs, orjson, sqlite3; "
    "print(json.dumps({'maxrss_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))"
)
ARCHIVER = (
    "import resource, json, sys, time; from pathlib import Path; from nerve_cli.store.archive import archive; "
    "t = time.perf_counter(); "
    "c0 = time.process_time(); "
    "r = archive(Path(sys.argv[1]), older_than_s=86400, now_ms=int(sys.argv[2]), vacuum=False); "
    "d = time.perf_counter() - t; cpu = time.process_time() - c0; "
    "import sqlite3; c = sqlite3.connect(r.databases[0].path); t = time.perf_counter(); c.execute('VACUUM'); "
    "v = time.perf_counter() - t; c.close(); "
    "print(json.dumps({'rows': r.rows, 'seconds': d, 'cpu': cpu, 'vacuum_s': v, 'ok': r.ok, "
    "'maxrss_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))"
)


BARE_LOOP = (
    "import json, orjson, sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); t = time.perf_counter(); n = 0\n"
    "c0 = time.process_time()\n"
    "with open(sys.argv[2], 'wb') as out:\n"
    "    for i, source, type_, ref, payload, ts in c.execute("
    "'SELECT id, source, type, ref_id, payload, ts FROM logs ORDER BY id'):\n"
    "        out.write(orjson.dumps({'id': i, 'source': source, 'type': type_, 'ref_id': ref, 'ts': ts, "
    "'payload': orjson.Fragment(payload) if payload else None}) + b'\\n'); n += 1\n"
    "print(json.dumps({'rows': n, 'seconds': time.perf_counter() - t, 'cpu': time.process_time() - c0}))"
)


def generate(db: Path, rows: int, days: int) -> None:
    from nerve_cli.store.logs import LogStore

    LogStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA synchronous = OFF")
    step = days * DAY // rows
    payloads = [
        '{"outcome":"signal","duration_ms":3,"reason":"interval","compute_id":"c-%d"}',
        '{"pid":4312,"group":"system"}',
        '{"message":"boom","error_type":"ValueError","sense":"cpu-usage","line":%d}',
    ]

    def batch(start: int, n: int):
        for i in range(start, start + n):
            kind = i % 3
            payload = payloads[kind] % i if "%d" in payloads[kind] else payloads[kind]
            yield ("reflex", "run_complete", "cpu-usage", payload, FIRST_DAY * DAY + i * step) if kind == 0 else (
                ("system", "worker_started", None, payload, FIRST_DAY * DAY + i * step) if kind == 1
                else ("system", "error", "cpu-usage", payload, FIRST_DAY * DAY + i * step))

    chunk = 100_000
    for start in range(0, rows, chunk):
        conn.executemany(
            "INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, ?, ?, ?, ?)",
            batch(start, min(chunk, rows - start)),
        )
        conn.commit()
    conn.close()


def child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        db = home / "data" / "logs.db"
        t = time.perf_counter()
        generate(db, args.rows, args.days)
        print(f"generated {args.rows:,} log rows over {args.days} days in {time.perf_counter() - t:.1f}s "
              f"({db.stat().st_size / 2**20:.0f} MiB logs.db)")
        pristine = Path(tmp) / "pristine.db"
        shutil.copyfile(db, pristine)
        loop_before = child(BARE_LOOP, str(pristine), str(Path(tmp) / "bare.jsonl"))
        floor = child(FLOOR)
        floor_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        now = (FIRST_DAY + args.days + 1) * DAY + 1
        result = child(ARCHIVER, str(home), str(now))
        peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        loop_after = child(BARE_LOOP, str(pristine), str(Path(tmp) / "bare.jsonl"))
        loop = {k: (loop_before[k] + loop_after[k]) / 2 for k in ("seconds", "cpu")} | {"rows": loop_before["rows"]}
        files = list((home / "data" / "archive" / "logs").glob("*.jsonl"))
        size = sum(f.stat().st_size for f in files)
        assert result["ok"] and result["rows"] == args.rows, result
        print(f"archived {result['rows']:,} rows into {len(files)} day files ({size / 2**20:.0f} MiB JSONL) "
              f"in {result['seconds']:.1f}s: {result['rows'] / result['seconds']:,.0f} rows/s; "
              f"then VACUUM {result['vacuum_s']:.2f}s → logs.db {db.stat().st_size / 1024:.0f} KiB")
        rate, bare = result["rows"] / result["seconds"], loop["rows"] / loop["seconds"]
        print(f"the same rows as JSONL by a bare loop (floor): {bare:,.0f} rows/s (before {loop_before['seconds']:.1f}s, "
              f"after {loop_after['seconds']:.1f}s); the archive does {rate / bare:.0%} of that (goal ≥ 50%)")
        print(f"CPU seconds: archive {result['cpu']:.2f}s, bare loop {loop['cpu']:.2f}s → "
              f"{loop['cpu'] / result['cpu']:.0%} of the loop's speed in CPU time; load average {os.getloadavg()[0]:.1f}")
        goal("archive 1,000,000 log rows", f"{rate:,.0f} rows/s = {rate / bare:.0%} of the loop",
             f"bare JSONL loop {bare:,.0f} rows/s", "≥ 50% of the loop", rate >= 0.5 * bare)
        print(f"peak RSS  archiving process: {result['maxrss_kib'] / 1024:.1f} MiB "
              f"(getrusage RUSAGE_CHILDREN after it: {peak_children / 1024:.1f} MiB)")
        print(f"peak RSS  bare python + same imports (floor): {floor['maxrss_kib'] / 1024:.1f} MiB "
              f"(RUSAGE_CHILDREN: {floor_children / 1024:.1f} MiB)")
        print(f"          → archiving {args.rows:,} rows costs {(result['maxrss_kib'] - floor['maxrss_kib']) / 1024:.1f} MiB "
              f"above the floor; one day's JSONL alone is {size / len(files) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
