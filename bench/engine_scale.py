"""Scale: does a hop cost more when many other senses are configured?

The ping-pong of `engine_hop.py` (a ↔ b across groups g1 and g2) runs while
N more senses sit idle in four more groups (`interval: 1h`; each has run once
at start-up and is not due again during the run). The kernel's cost per event
must not grow with N: "what starts now" and "when is the next wake-up" come
from heaps, and which senses can run is kept by the supervisors, not
recomputed per event.

Each N runs beside N = 0 in the same run (N = 0 first and again last; its
figures pool both). Figures: hop median and p99, the kernel's CPU per hop
(schedstat of every kernel thread, so the log writer is in it) and hops/s.
Target: at N = 1,000, hop median and kernel CPU per hop within 1.3× of N = 0.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, count_logs, cpu_ns, instance, machine, median, pct, us, wait_until
from engine_hop import PING, count, hops

NS = (0, 300, 1000)
IDLE_GROUPS = 4
HOPS = 3000  # per direction
DEADLINE = 30.0
TARGET = 1.3

IDLE = "def compute(db, peers):\n    return 1\n"


def config(n: int) -> tuple[str, dict[str, str]]:
    lines = ["senses:", "  a: {group: g1, peers: [b]}", "  b: {group: g2, peers: [a]}"]
    lines += [f"  idle{i}: {{group: idle{i % IDLE_GROUPS}}}" for i in range(n)]
    lines += ["reflexes:", "  - {sense: a, on: [b, go]}", "  - {sense: b, on: [a]}"]
    lines += [f"  - {{sense: idle{i}, interval: 1h}}" for i in range(n)]
    senses = {"a": PING.format(other="b"), "b": PING.format(other="a")}
    senses.update({f"idle{i}": IDLE for i in range(n)})
    return "\n".join(lines) + "\n", senses


def measure(n: int) -> dict:
    text, senses = config(n)
    with instance(text, senses) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=2 + (IDLE_GROUPS if n else 0), timeout=180)
            # every idle sense runs once at start (it never completed): let that burst pass first
            wait_until(lambda: count_logs(home, "run_complete") >= n, 180, interval=0.2)
            time.sleep(0.5)
            cpu0, started = cpu_ns(engine.pid), time.monotonic()
            engine.request("emit", channel="go")
            wait_until(lambda: count(home, "a") > HOPS, DEADLINE, interval=0.1)
            cpu1, elapsed = cpu_ns(engine.pid), time.monotonic() - started
        values = hops(home, "a") + hops(home, "b")
        done = max(1, count(home, "a") + count(home, "b") - 1)
    return {"values": values, "rate": done / elapsed, "cpu": (cpu1 - cpu0) / 1000 / done}


def main() -> None:
    runs = {n: measure(n) for n in NS}
    again = measure(0)
    base = {"values": runs[0]["values"] + again["values"], "rate": (runs[0]["rate"] + again["rate"]) / 2,
            "cpu": (runs[0]["cpu"] + again["cpu"]) / 2}
    runs[0] = base
    report = Report(f"scale: the a ↔ b hop with N idle senses in {IDLE_GROUPS} more groups ({machine()})")
    b_med, b_cpu = median(base["values"]), base["cpu"]
    for n in NS:
        r = runs[n]
        if len(r["values"]) < 100:
            report.row(f"N = {n:,}: hops", f"only {len(r['values'])} in {DEADLINE:g}s", "", "", False)
            continue
        med, p99, cpu = median(r["values"]), pct(r["values"], 99), r["cpu"]
        judged = n == max(NS)
        report.row(f"N = {n:,}: hop median", us(med), "" if n == 0 else f"N = 0: {us(b_med)} ({med / b_med:.2f}×)",
                   f"≤ {TARGET}× N = 0" if judged else "", med <= TARGET * b_med if judged else None)
        report.row(f"N = {n:,}: hop p99", us(p99), "" if n == 0 else f"N = 0: {us(pct(base['values'], 99))}")
        report.row(f"N = {n:,}: kernel CPU per hop", us(cpu), "" if n == 0 else f"N = 0: {us(b_cpu)} ({cpu / b_cpu:.2f}×)",
                   f"≤ {TARGET}× N = 0" if judged else "", cpu <= TARGET * b_cpu if judged else None)
        report.row(f"N = {n:,}: hops/s", f"{r['rate']:,.0f}/s", "" if n == 0 else f"N = 0: {base['rate']:,.0f}/s")
    report.note("N = 0 ran first and again last; its figures pool both runs")
    report.print()


if __name__ == "__main__":
    main()
