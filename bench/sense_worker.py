"""Sense worker throughput and round trip, beside a raw JSON-lines pipe measured in the same run.

- one at a time: send Compute, wait for its Signal, repeat (the round trip the
  kernel pays per compute of one sense), median and p99;
- pipelined: keep a window of computes in flight (the worker still runs one
  compute per sense at a time; this removes the pipe latency from the figure);
- floor: a trivial echo child over the same kind of pipe, same read loop.

The trivial sense inserts one row and returns a number (one real SQLite
transaction per compute, WAL + synchronous=NORMAL). Run: `python bench/sense_worker.py`.
"""

from __future__ import annotations

import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nerve_cli.ops.senses.worker_client import SenseWorkerClient
from nerve_cli.wire.protocol import Compute, Signal

N_SERIAL = 3000
N_PIPELINED = 10000
WINDOW = 128

SCHEMA = """
from nerve_cli.sdk import table

@table()
class Tick:
    n: int
"""
MIGRATION = "CREATE TABLE tick (n INTEGER NOT NULL);\n"
SYNC = """
from .schema import Tick
_n = [0]

def compute(db, peers):
    _n[0] += 1
    db.insert(Tick(n=_n[0]))
    return _n[0]
"""
ASYNC = SYNC.replace("def compute", "async def compute")
ECHO = """
import sys
out, read = sys.stdout.buffer, sys.stdin.buffer.readline
for line in iter(read, b""):
    out.write(line)
    out.flush()
"""


def make_instance(root: Path) -> Path:
    home = root / "home"
    config = ["senses:"]
    for name, code in (("tick", SYNC), ("atick", ASYNC)):
        folder = home / "senses" / name
        (folder / "migrations").mkdir(parents=True)
        (folder / "schema.py").write_text(textwrap.dedent(SCHEMA))
        (folder / "sense.py").write_text(textwrap.dedent(code))
        (folder / "migrations" / "0001_init.sql").write_text(MIGRATION)
        config.append(f"  {name}: {{group: bench}}")
    (home / "nerve.yaml").write_text("\n".join(config) + "\n")
    return home


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def serial(w: SenseWorkerClient, sense: str, n: int) -> tuple[float, list[float]]:
    times = []
    start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        answer = w.compute(sense, timeout=30)
        times.append((time.perf_counter() - t0) * 1e6)
        assert isinstance(answer, Signal), answer
    return n / (time.perf_counter() - start), times


def pipelined(w: SenseWorkerClient, sense: str, n: int, window: int) -> float:
    sent = done = 0
    start = time.perf_counter()
    while done < n:
        batch = min(window - (sent - done), n - sent)
        if batch > 0:
            w.send(*(Compute(w.next_id(), sense) for _ in range(batch)))
            sent += batch
        msg = w.read(30)
        assert isinstance(msg, Signal), msg
        done += 1
    return n / (time.perf_counter() - start)


def echo_round_trips(n: int) -> list[float]:
    proc = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    fd, buf, times = proc.stdout.fileno(), bytearray(), []
    line = Compute(1, "tick").encode()
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            proc.stdin.write(line)
            while b"\n" not in buf:  # the same select + os.read loop as the worker client
                select.select([fd], [], [], 5)
                buf += os.read(fd, 65536)
            end = buf.index(b"\n")
            orjson.loads(bytes(buf[:end]))
            del buf[: end + 1]
            times.append((time.perf_counter() - t0) * 1e6)
    finally:
        proc.stdin.close()
        proc.wait(5)
    return times


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="nerve-bench-worker-"))
    try:
        home = make_instance(root)
        t0 = time.perf_counter()
        w = SenseWorkerClient(home, "bench")
        w.start()
        spawn_ms = (time.perf_counter() - t0) * 1000
        try:
            serial(w, "tick", 200)  # warm up
            rows = []
            for sense, label in (("tick", "sync"), ("atick", "async")):
                rate, times = serial(w, sense, N_SERIAL)
                piped = pipelined(w, sense, N_PIPELINED, WINDOW)
                rows.append((label, rate, statistics.median(times), pct(times, 0.99), piped))
        finally:
            w.stop()
        echo = echo_round_trips(N_SERIAL)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"sense worker: spawn to ready {spawn_ms:.0f} ms (a plain start that reads nerve.yaml itself, as "
          "`nerve sense compute` does; the engine's warm start: bench/worker_start.py); "
          "trivial sense = 1-row insert + signal row, 1 txn per compute")
    print(f"{'compute':8} {'one-at-a-time/s':>16} {'rtt p50 µs':>11} {'rtt p99 µs':>11} {'pipelined/s':>12}")
    for label, rate, p50, p99, piped in rows:
        print(f"{label:8} {rate:16.0f} {p50:11.0f} {p99:11.0f} {piped:12.0f}")
    print(f"{'raw pipe':8} {1e6 / statistics.mean(echo):16.0f} {statistics.median(echo):11.0f} "
          f"{pct(echo, 0.99):11.0f} {'':>12}   (echo child, same read loop)")
    overhead = rows[0][2] - statistics.median(echo)
    print(f"worker overhead over the raw pipe (sync, p50): {overhead:.0f} µs per compute")


if __name__ == "__main__":
    main()
