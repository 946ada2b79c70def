"""A ten-sense chain through the engine vs the cron-style way: a fresh python per compute.

Engine: s1 → s2 → … → s10, each `on:` the previous (s1 on an external
channel), alternating between two groups so every hop crosses workers. Each
compute writes its `_signals` row in its own transaction and returns
`monotonic_ns()`; we take the time from just before the `emit` request to
s10's returned value, repeated, median.

Cron-style, same run: what users do today without an engine — ten sequential
`python -c "<open sqlite, insert a row, commit>"` processes, one database
each, timed end to end. Printed as a ratio.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, instance, machine, median, pct, query, wait_until

LENGTH = 10
REPEATS = 20

STEP = """
import time

def compute(db, peers):
    return time.monotonic_ns()
"""

CRON_STEP = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1])
conn.execute("CREATE TABLE IF NOT EXISTS sample (ts INTEGER, value REAL)")
conn.execute("INSERT INTO sample VALUES (?, ?)", (time.time_ns() // 1_000_000, 1.0))
conn.commit()
conn.close()
"""


def config() -> str:
    lines = ["senses:"] + [f"  s{i}: {{group: g{i % 2}}}" for i in range(1, LENGTH + 1)]
    lines += ["reflexes:", "  - {sense: s1, on: [go]}"]
    lines += [f"  - {{sense: s{i}, on: [s{i - 1}]}}" for i in range(2, LENGTH + 1)]
    return "\n".join(lines) + "\n"


def last_end(home: Path) -> tuple[int, int]:
    """(how many signals s10 has, the monotonic ns its last compute returned)."""
    rows = query(home / "data" / "senses" / f"s{LENGTH}.db", "SELECT count(*), max(id) FROM _signals")
    if not rows or not rows[0][0]:
        return 0, 0
    value = query(home / "data" / "senses" / f"s{LENGTH}.db", "SELECT payload FROM _signals WHERE id = ?", (rows[0][1],))
    return rows[0][0], int(value[0][0])


def engine_chain() -> list[float]:
    """Milliseconds from emit to s10's completion, one per repeat."""
    times = []
    with instance(config(), {f"s{i}": STEP for i in range(1, LENGTH + 1)}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=2)
            for _ in range(REPEATS + 2):  # the first two warm up the sense databases' caches
                seen = last_end(home)[0]
                t0 = time.monotonic_ns()
                engine.request("emit", channel="go")
                if not wait_until(lambda: last_end(home)[0] > seen, 10, interval=0.005):
                    return times  # the chain stalled; report what we have
                times.append((last_end(home)[1] - t0) / 1e6)
                time.sleep(0.02)  # let the log flush settle between runs
    return times[2:]


def cron_chain() -> list[float]:
    """Milliseconds for ten sequential fresh-python computes, one per repeat (fewer: each is slow)."""
    times = []
    with tempfile.TemporaryDirectory(prefix="nerve-bench-cron-") as tmp:
        for _ in range(max(5, REPEATS // 4)):
            t0 = time.monotonic_ns()
            for i in range(1, LENGTH + 1):
                subprocess.run([sys.executable, "-c", CRON_STEP, str(Path(tmp) / f"s{i}.db")], check=True)
            times.append((time.monotonic_ns() - t0) / 1e6)
    return times


def main() -> None:
    cron = cron_chain()
    chain = engine_chain()
    report = Report(f"ten-sense chain: emit → s{LENGTH} complete, vs ten fresh `python -c` computes ({machine()})")
    report.row(f"cron-style: {LENGTH} sequential fresh pythons, median", f"{median(cron):,.1f} ms ({len(cron)} runs)")
    if len(chain) < REPEATS:
        report.row("engine chain", f"stalled after {len(chain)} of {REPEATS} runs", f"{median(cron):,.1f} ms", "faster", False)
        report.note("a sense's signal did not start its listener (the chain waits for a timer that never comes)")
    else:
        report.row("engine chain, median", f"{median(chain):,.2f} ms ({len(chain)} runs)", f"{median(cron):,.1f} ms",
                   "faster", median(chain) < median(cron))
        report.row("engine chain, p90 / max", f"{pct(chain, 90):,.2f} / {max(chain):,.2f} ms")
        report.row("engine chain, per hop (median / 10)", f"{median(chain) / LENGTH * 1000:,.0f} µs")
        report.row("cron-style / engine", f"{median(cron) / median(chain):,.0f}× faster")
    report.print()


if __name__ == "__main__":
    main()
