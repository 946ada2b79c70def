"""Events: emit → listener latency, sustained events/s into one listener, and the cost of a durable ack.

1. Latency. A client emits on channel `go` every 5 ms with `{"t": monotonic_ns()}`;
   listener `l` (group g1) takes `t0 = monotonic_ns()` first thing and records
   `t0 - t`: the client's request, the commit to events.db, routing, the
   Compute line and the worker's read of its events, in the compute's
   transaction. `l` returns a fresh `t`, and `a` (group g2, `on: [l]`) records
   the same for the sense → sense hop, measured in the same engine: the hop
   figure the emit is judged beside. `p` (group g3) is the same hop for a
   compute without `trigger`, which reads no events: the difference is what
   reading events and moving the cursor costs. CLOCK_MONOTONIC is
   system-wide on Linux.
2. Throughput. Eight client connections emit 20,000 events as fast as the
   engine acknowledges them; listener `store` inserts every event it receives
   into its table. The figure is events delivered per second, from the first
   emit to the last event committed by the listener, and every event must be
   there exactly once. Floors: one-row WAL commits/s and pipe round trips/s,
   in this process.
3. The durable ack. Emit round trip (send → answer) at a steady 1,000 emits/s
   against this checkout, and against the code from just before emits were
   made durable (answered before any commit), exported from git and run in
   the same way (NERVE_BENCH_SRC). Target: p99 ≤ 2 ms after.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import (
    Client,
    Engine,
    Report,
    instance,
    machine,
    median,
    paced_emits,
    pct,
    pipe_round_trips,
    query,
    signals,
    us,
    wait_until,
)

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 30

LATENCY_CONFIG = """
senses:
  l: {group: g1}
  a: {group: g2}
  p: {group: g3, peers: [l]}
reflexes:
  - {sense: l, on: [go]}
  - {sense: a, on: [l]}
  - {sense: p, on: [l]}
"""
LISTENER = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    lat = t0 - trigger.events[0].payload["t"] if len(trigger.events) == 1 else None
    return {"lat": lat, "t": time.monotonic_ns()}
"""
HOP = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    return {"hop": t0 - trigger.events[-1].payload["t"] if len(trigger.events) == 1 else None}
"""# the same hop for a compute without `trigger` (reads l's last signal through peers, as bench/engine_hop.py does)
PLAIN_HOP = """
import time

def compute(db, peers):
    t0 = time.monotonic_ns()
    return {"hop": t0 - peers["l"].last_signal()["payload"]["t"]}
"""

THROUGHPUT_CONFIG = """
senses:
  store: {group: g1}
reflexes:
  - {sense: store, on: [load]}
"""
STORE_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="event_id")
class Got:
    event_id: int
    payload: str
"""
STORE = """
import json
from .schema import Got

def compute(db, peers, trigger):
    db.insert_all(Got(event_id=e.id, payload=json.dumps(e.payload)) for e in trigger.events)
    return len(trigger.events)
"""
TOTAL = 20_000
CLIENTS = 8

ROUND_TRIP_CONFIG = """
senses:
  l: {group: g1}
reflexes:
  - {sense: l, on: [go]}
"""
PLAIN = "def compute(db, peers):\n    return 1\n"
RATE = 1000  # emits per second
SECONDS = 5.0


# -- 1. latency ---------------------------------------------------------------------

def latency(n: int = 600) -> tuple[list[float], list[float], list[float]]:
    """(emit → l, l → a with its events, l → p without) in µs."""
    with instance(LATENCY_CONFIG, {"l": LISTENER, "a": HOP, "p": PLAIN_HOP}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=3)
            paced_emits(home, "go", n + WARMUP)
            wait_until(lambda: len(signals(home, "a")) >= n + WARMUP and len(signals(home, "p")) >= n + WARMUP, 20)
        emit = [s["payload"]["lat"] / 1000 for s in signals(home, "l") if s["payload"]["lat"] is not None]
        hop = [s["payload"]["hop"] / 1000 for s in signals(home, "a") if s["payload"]["hop"] is not None]
        plain = [s["payload"]["hop"] / 1000 for s in signals(home, "p")]
    return emit[WARMUP:], hop[WARMUP:], plain[WARMUP:]


# -- 2. throughput ------------------------------------------------------------------

def stored(home: Path) -> int:
    rows = query(home / "data" / "senses" / "store.db", "SELECT count(*) FROM got")
    return rows[0][0] if rows else 0


def throughput() -> tuple[float, float, int, int]:
    """(events/s delivered, emits/s acknowledged, rows stored, distinct events stored)."""
    with instance(THROUGHPUT_CONFIG, {"store": STORE}, {"store": STORE_SCHEMA}) as home:
        from nerve_cli.schema.migrate import generate_migration

        generate_migration(home / "senses" / "store")
        with Engine(home) as engine:
            engine.wait_ready(groups=1)
            clients = [Client(home) for _ in range(CLIENTS)]
            started = time.monotonic()

            def send(client: Client, share: int) -> None:
                for i in range(share):
                    assert client.emit("load", {"i": i})["ok"]

            threads = [threading.Thread(target=send, args=(c, TOTAL // CLIENTS)) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            acked = time.monotonic() - started
            wait_until(lambda: stored(home) >= TOTAL, 60, interval=0.01)
            delivered = time.monotonic() - started
            for c in clients:
                c.close()
        rows = query(home / "data" / "senses" / "store.db", "SELECT count(*), count(DISTINCT event_id) FROM got")[0]
    return TOTAL / delivered, TOTAL / acked, rows[0], rows[1]


def sqlite_commits(n: int = 5000) -> float:
    """One-row WAL (synchronous=NORMAL) commits per second, in this process: the store's floor."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "e.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT, payload TEXT, ts INT)")
        started = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO events (channel, payload, ts) VALUES ('load', ?, ?)", (f'{{"i": {i}}}', i))
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
        conn.close()
    return n / elapsed


# -- 3. the durable ack -------------------------------------------------------------------

def before_durable_ack() -> tuple[str, str] | None:
    """(commit, folder) of nerve_cli as it was just before emits became durable, exported from git."""
    try:
        added = subprocess.run(["git", "log", "--format=%H", "--diff-filter=A", "--", "nerve_cli/kernel/emits.py"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
        if not added:
            return None
        rev = f"{added[-1]}^"
        folder = tempfile.mkdtemp(prefix="nerve-before-")
        archive = subprocess.run(["git", "archive", rev, "nerve_cli"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        short = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True).stdout
        return short.strip(), folder
    except (OSError, subprocess.CalledProcessError):
        return None


def round_trips(src: str | None) -> list[float]:
    """Emit round trips (µs) at a steady RATE per second for SECONDS, against the code in `src` (None: checkout)."""
    saved = os.environ.pop("NERVE_BENCH_SRC", None)
    if src:
        os.environ["NERVE_BENCH_SRC"] = src
    try:
        with instance(ROUND_TRIP_CONFIG, {"l": PLAIN}) as home:
            with Engine(home) as engine:
                engine.wait_ready(groups=1)
                client = Client(home)
                out: list[float] = []
                n = int(RATE * SECONDS)
                next_at = time.monotonic()
                for i in range(n + WARMUP):
                    t0 = time.perf_counter_ns()
                    assert client.emit("go", {"i": i})["ok"]
                    if i >= WARMUP:
                        out.append((time.perf_counter_ns() - t0) / 1000)
                    next_at += 1 / RATE
                    time.sleep(max(0.0, next_at - time.monotonic()))
                client.close()
        return out
    finally:
        os.environ.pop("NERVE_BENCH_SRC", None)
        if saved is not None:
            os.environ["NERVE_BENCH_SRC"] = saved


def main() -> None:
    floor = pipe_round_trips()
    emit, hop, plain = latency()
    floor += pipe_round_trips()
    report = Report(f"events: emit → listener, sustained delivery, durable ack ({machine()})")
    report.row("raw pipe round trip, blocking, median", us(median(floor)))
    if emit and hop:
        report.row("emit → listener compute start, median", us(median(emit)), f"hop {us(median(hop))}",
                   "≤ 2× hop + 1 pipe round trip", median(emit) <= 2 * median(hop) + median(floor))
        report.row("emit → listener compute start, p99", us(pct(emit, 99)), f"hop {us(pct(hop, 99))}", "≤ 2,000 µs",
                   pct(emit, 99) <= 2000)
        report.row("signal → listener compute start (hop), median / p99", f"{us(median(hop))} / {us(pct(hop, 99))}",
                   us(median(floor)))
        report.row("the same hop, compute without trigger (no events read), median / p99",
                   f"{us(median(plain))} / {us(pct(plain, 99))}", us(median(floor)))
        report.row("samples (emit / hop)", f"{len(emit):,} / {len(hop):,}")
    else:
        report.row("emit → listener compute start", "no samples", "", "", False)

    rate, acked, rows, distinct = throughput()
    commits = sqlite_commits()
    report.row("sustained events/s into one listener (delivered)", f"{rate:,.0f}/s",
               f"{commits:,.0f} WAL commits/s; {1e6 / median(floor):,.0f} pipe round trips/s", "≥ 2,000/s",
               rate >= 2000 and rows == distinct == TOTAL)
    report.row("emits acknowledged/s (8 clients)", f"{acked:,.0f}/s")
    report.row("events stored by the listener / distinct / sent", f"{rows:,} / {distinct:,} / {TOTAL:,}", "",
               "all, once", rows == distinct == TOTAL)

    # NERVE_BENCH_SKIP_BEFORE=1: no run of the code before durable acks (a tree with no git history cannot
    # export it, so an interleaved run against such a tree skips it on both sides: what runs first changes the rest)
    before = None if os.environ.get("NERVE_BENCH_SKIP_BEFORE") else before_durable_ack()
    after = round_trips(None)
    if before is not None:
        rev, folder = before
        old = round_trips(folder)
        report.row(f"emit round trip at {RATE:,}/s, ack before commit ({rev}), p50 / p99",
                   f"{us(median(old))} / {us(pct(old, 99))}", us(median(floor)))
    else:
        report.note("the code before durable emits could not be exported from git; only 'after' is measured")
    report.row(f"emit round trip at {RATE:,}/s, ack after commit (this checkout), p50 / p99",
               f"{us(median(after))} / {us(pct(after, 99))}", us(median(floor)), "p99 ≤ 2,000 µs",
               pct(after, 99) <= 2000)
    report.print()


if __name__ == "__main__":
    main()
