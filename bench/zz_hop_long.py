"""Hop latency: one sense's signal to the next sense's compute start, across two groups.

Two senses ping-pong through the real engine: `a` (group g1) runs on `b`'s
signal, `b` (group g2) on `a`'s. Each compute first takes `t0 =
monotonic_ns()`, reads the other sense's last signal through `peers` and
records `t0 - t` (`t` is what the other sense returned just before returning),
then returns a fresh `t`. CLOCK_MONOTONIC is system-wide on Linux, so the two
workers' clocks agree. A hop therefore covers: commit of the `_signals` row,
the Signal line to the kernel, its run_complete + run_start log rows, the
Compute line to the other worker, its thread hand-off and BEGIN.

The floor is a raw JSON-lines round trip to a trivial echo child (stdlib json
both sides, blocking pipes, several fresh children, before and after the
engine run): a hop is two pipe transits too (worker → kernel → worker).
Target: median ≤ 2× the blocking-pipe round trip, p99 ≤ 1 ms.

The same ping-pong then runs with the kernel on asyncio's own loop
(`NERVE_LOOP=asyncio`), so what uvloop buys shows in the same run. With
`NERVE_BENCH_BEFORE=DIR` (a source tree of an earlier Nerve, e.g. `git archive
REV | tar -x -C DIR`) it runs once more on that code (`PYTHONPATH=DIR`, same
machine, same minute): the hop beside the hop before, e.g. what carrying the
causal depth (kernel.core.causes) costs.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import (
    Engine,
    Report,
    asyncio_round_trips,
    cpu_ns,
    family,
    goal,
    instance,
    machine,
    median,
    pct,
    pipe_round_trips,
    query,
    signals,
    us,
    wait_until,
)

HOPS = 30000  # per direction
WARMUP = 50
DEADLINE = 60.0  # seconds; fewer hops by then is itself the finding

CONFIG = """
senses:
  a: {group: g1, peers: [b]}
  b: {group: g2, peers: [a]}
reflexes:
  - {sense: a, on: [b, go]}
  - {sense: b, on: [a]}
"""

PING = """
import time

def compute(db, peers):
    t0 = time.monotonic_ns()
    last = peers["{other}"].last_signal()
    hop = t0 - last["payload"]["t"] if last else None
    return {{"hop": hop, "t": time.monotonic_ns()}}
"""


def hops(home: Path, sense: str) -> list[float]:
    """Hop latencies (µs) into `sense`, warm-up dropped."""
    values = [s["payload"]["hop"] / 1000 for s in signals(home, sense) if s["payload"]["hop"] is not None]
    return values[WARMUP:]


def count(home: Path, sense: str) -> int:
    rows = query(home / "data" / "senses" / f"{sense}.db", "SELECT count(*) FROM _signals")
    return rows[0][0] if rows else 0


def measure(env: dict[str, str] | None = None) -> tuple[list[float], float, list[float], dict]:
    """(hop latencies µs, hops/s, CPU µs per hop of the kernel and each worker, the engine's sense status)."""
    with instance(CONFIG, {"a": PING.format(other="b"), "b": PING.format(other="a")}) as home:
        with Engine(home, env=env) as engine:
            engine.wait_ready(groups=2)
            pids = family(engine.pid)
            cpu0, started = [cpu_ns(p) for p in pids], time.monotonic()
            engine.request("emit", channel="go")
            wait_until(lambda: count(home, "a") > HOPS + WARMUP, DEADLINE, interval=0.1)
            cpu1, elapsed = [cpu_ns(p) for p in pids], time.monotonic() - started
            status = engine.request("status")["senses"]
        values = hops(home, "a") + hops(home, "b")
        done = max(1, count(home, "a") + count(home, "b") - 1)
        return values, done / elapsed, [(b - a) / 1000 / done for a, b in zip(cpu0, cpu1)], status


def main() -> None:
    blocking = pipe_round_trips()
    in_asyncio = asyncio_round_trips()
    values, rate, cpu, status = measure()
    stock, stock_rate, stock_cpu, _ = measure({"NERVE_LOOP": "asyncio"})
    before_dir = os.environ.get("NERVE_BENCH_BEFORE")
    before = measure({"PYTHONPATH": before_dir}) if before_dir else None
    again = measure() if before_dir else None  # the current code once more, after: the machine drifts
    blocking += pipe_round_trips()  # before and after: the floor sees the same machine the engine did
    floor = median(blocking)
    report = Report(f"hop latency: a's signal → b's compute start, two groups ({machine()})")
    report.row("raw pipe round trip, blocking, median", us(floor))
    report.row("raw pipe round trip, blocking, p99", us(pct(blocking, 99)))
    report.row("raw pipe round trip, asyncio parent, median", us(median(in_asyncio)))
    report.row("hops completed (both directions)", f"{len(values):,} in ≤ {DEADLINE:g}s (+{WARMUP} warm-up each way)")
    if len(values) < 100:
        report.row("hop median", "no hops", us(floor), f"≤ 2× floor = {us(2 * floor)}", False)
        goal("signal hop across groups, median / p99", "no hops", f"blocking pipe round trip {us(floor)}",
             "≤ 2× the pipe, p99 ≤ 1 ms", False)
        report.row("hop p99", "no hops", "", "≤ 1,000 µs", False)
        report.note("the ping-pong stalled: a signal did not start its listener. Engine state at the end: "
                    + "; ".join(f"{n}: running={s['running']} pending={s['pending']} runs={s['runs']}"
                                for n, s in status.items()))
        report.print()
        return
    report.row("hop median", us(median(values)), us(floor), f"≤ 2× floor = {us(2 * floor)}",
               median(values) <= 2 * floor)
    report.row("hop median / floor", f"{median(values) / floor:.1f}×", "", "≤ 2.0×", median(values) <= 2 * floor)
    report.row("hop p99", us(pct(values, 99)), "", "≤ 1,000 µs", pct(values, 99) <= 1000)
    goal("signal hop across groups, median / p99",
         f"{us(median(values))} / {us(pct(values, 99))} = {median(values) / floor:.1f}× the pipe",
         f"blocking pipe round trip {us(floor)}", "≤ 2× the pipe, p99 ≤ 1 ms",
         median(values) <= 2 * floor and pct(values, 99) <= 1000)
    report.row("hop p90 / max", f"{pct(values, 90):,.0f} / {max(values):,.0f} µs")
    report.row("hops per second (ping-pong)", f"{rate:,.0f}/s")
    report.row("CPU per hop: kernel / worker g1 / worker g2", " / ".join(f"{c:,.0f}" for c in cpu) + " µs")
    if len(stock) >= 100:
        report.row("kernel on asyncio's loop: hop median / p99", f"{us(median(stock))} / {us(pct(stock, 99))}",
                   f"uvloop: {us(median(values))} / {us(pct(values, 99))}")
        report.row("kernel on asyncio's loop: kernel CPU per hop, hops/s", f"{stock_cpu[0]:,.0f} µs, {stock_rate:,.0f}/s",
                   f"uvloop: {cpu[0]:,.0f} µs, {rate:,.0f}/s")
    if before is not None and again is not None and len(before[0]) >= 100:
        now_values = values + again[0]
        report.row("this code (2 runs): hop median / p99, kernel CPU per hop",
                   f"{us(median(now_values))} / {us(pct(now_values, 99))}, "
                   f"{(cpu[0] + again[2][0]) / 2:,.0f} µs", f"before ({before_dir}): {us(median(before[0]))} / "
                   f"{us(pct(before[0], 99))}, {before[2][0]:,.0f} µs")
    report.print()


if __name__ == "__main__":
    main()
