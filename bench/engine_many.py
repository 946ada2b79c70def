"""Many senses at once: 1,000 senses on 1 s intervals across 10 groups, for 60 s.

A legitimate workload (one sense per repo, service or queue someone watches):
the kernel must hold every sense's rhythm with bounded CPU, and its log
writer must keep up (run_start + run_complete for 1,000 computes a second,
one transaction per flush).

Figures, over the window after start-up has settled: computes per second
achieved (an interval counts from the last completion, so 1,000/s is the
ceiling), interval lateness p50/p99 in the first and the last third (due
times are absolute: lateness must not grow), the kernel's CPU (schedstat of
all its threads) and peak RSS, and how far behind the log is at the end.

Floor, same run: a plain asyncio process holding 1,000 timers at 1 s on
absolute deadlines (what an event loop alone costs), its lateness and CPU.
Targets: ≥ 98% of the wanted computes, lateness p99 ≤ 20 ms, kernel CPU ≤ 35%
of one core. And `nerve status` (drawn as on a terminal, and --json) stays
well under a second with 1,000 senses: ≤ 500 ms, beside `nerve --help`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import CLI_CWD, Engine, Report, count_logs, cpu_ns, engine_env, instance, logs, machine, median, pct, query, wait_until

SENSES = 1000
GROUPS = 10
SETTLE = 8.0  # start-up: every sense runs at once (never completed), then spreads into its rhythm
WINDOW = 60.0
TRIVIAL = "def compute(db, peers):\n    return 1\n"

FLOOR_CHILD = """
import asyncio, json, sys, time

async def run(n, window):
    loop = asyncio.get_running_loop()
    late = []
    def fire(due):
        now = time.time()
        late.append((now, (now - due) * 1000))
        nxt = now + 1.0
        loop.call_at(loop.time() + (nxt - time.time()), fire, nxt)
    for i in range(n):
        due = time.time() + i / n  # spread over the second, as the engine's senses settle
        loop.call_at(loop.time() + i / n, fire, due)
    await asyncio.sleep(window)
    cpu = time.process_time()
    print(json.dumps({"late": late, "cpu": cpu}))

asyncio.run(run(int(sys.argv[1]), float(sys.argv[2])))
"""


def config() -> str:
    lines = ["senses:"] + [f"  s{i}: {{group: g{i % GROUPS}}}" for i in range(SENSES)]
    lines += ["reflexes:"] + [f"  - {{sense: s{i}, interval: 1s}}" for i in range(SENSES)]
    return "\n".join(lines) + "\n"


def thirds(samples: list[tuple[float, float]], start: float, end: float) -> tuple[list[float], list[float]]:
    span = (end - start) / 3
    return ([v for t, v in samples if t < start + span], [v for t, v in samples if t >= end - span])


def floor(window: float) -> tuple[list[tuple[float, float]], float]:
    child = subprocess.run([sys.executable, "-c", FLOOR_CHILD, str(SENSES), str(window)],
                           capture_output=True, text=True, timeout=window + 60)
    out = json.loads(child.stdout)
    late = [tuple(x) for x in out["late"]][SENSES:]  # its first round is "due now"
    return late, out["cpu"] / window * 100


def measure() -> dict:
    with instance(config(), {f"s{i}": TRIVIAL for i in range(SENSES)}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=GROUPS, timeout=180)
            wait_until(lambda: count_logs(home, "run_complete") >= SENSES, 120, interval=0.2)
            time.sleep(SETTLE)
            proc = psutil.Process(engine.pid)
            rss = proc.memory_info().rss
            t0, cpu0, n0 = time.time(), cpu_ns(engine.pid), count_logs(home, "run_complete")
            deadline = time.monotonic() + WINDOW
            while time.monotonic() < deadline:
                time.sleep(1.0)
                rss = max(rss, proc.memory_info().rss)
            t1, cpu1 = time.time(), cpu_ns(engine.pid)
            lag_rows = query(home / "data" / "logs.db", "SELECT max(ts) FROM logs")
            lag_ms = t1 * 1000 - (lag_rows[0][0] or 0) if lag_rows else float("nan")
            n1 = count_logs(home, "run_complete")
            status = {fmt: cli_ms(home, "status", "--format", fmt) for fmt in ("table", "json")}
            floor_cli = cli_ms(None, "--help")
        starts = [(r["ts"] / 1000, r["payload"]["lateness_ms"]) for r in logs(home, "run_start")
                  if r["payload"].get("reason") == "interval" and t0 <= r["ts"] / 1000 <= t1
                  and r["ref"] != "nerve-health"]
    return {"t0": t0, "t1": t1, "rate": (n1 - n0) / (t1 - t0), "cpu": (cpu1 - cpu0) / 1e9 / (t1 - t0) * 100,
            "rss": rss / 2**20, "lag_ms": lag_ms, "starts": starts, "status": status, "help": floor_cli}


def cli_ms(home: Path | None, *args: str) -> float:
    """Wall time of `nerve ARGS` (best of three), against the running engine."""
    where = ["--home", str(home)] if home is not None else []
    env = {**engine_env(), "COLUMNS": "160"}
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "nerve_cli", *args, *where], capture_output=True, env=env,
                              cwd=CLI_CWD)
        best = min(best, (time.perf_counter() - t) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"bench: nerve {' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    return best


def main() -> None:
    m = measure()
    floor_late, floor_cpu = floor(WINDOW / 3)
    values = [v for _, v in m["starts"]]
    first, last = thirds(m["starts"], m["t0"], m["t1"])
    report = Report(f"many senses: {SENSES:,} senses at 1s in {GROUPS} groups, {WINDOW:g}s window ({machine()})")
    if not values:
        report.row("interval computes", "none measured", "", "", False)
        report.print()
        return
    share = m["rate"] / SENSES
    report.row("computes/s achieved", f"{m['rate']:,.0f}/s ({share:.1%} of {SENSES:,}/s)", "", "≥ 98%", share >= 0.98)
    fvals = [v for _, v in floor_late]
    report.row("interval lateness p50 / p99", f"{median(values):.2f} / {pct(values, 99):.2f} ms",
               f"{median(fvals):.2f} / {pct(fvals, 99):.2f} ms (asyncio, {SENSES:,} timers)",
               "p99 ≤ 20 ms", pct(values, 99) <= 20)
    grows = bool(first and last) and median(last) > median(first) + 1.0
    report.row("first third p50 / p99", f"{median(first):.2f} / {pct(first, 99):.2f} ms")
    report.row("last third p50 / p99", f"{median(last):.2f} / {pct(last, 99):.2f} ms", "",
               "p50 ≤ first third's + 1 ms", not grows)
    report.row("kernel CPU", f"{m['cpu']:.1f}% of one core", f"{floor_cpu:.1f}% (asyncio, {SENSES:,} timers)",
               "≤ 35%", m["cpu"] <= 35)
    report.row("kernel peak RSS", f"{m['rss']:.1f} MiB")
    report.row("log behind at the end", f"{m['lag_ms']:.0f} ms", "", "a flush or two (≤ 100 ms)", m["lag_ms"] <= 100)
    table, doc = m["status"]["table"], m["status"]["json"]
    report.row(f"`nerve status` with {SENSES:,} senses: table / --json", f"{table:.0f} / {doc:.0f} ms",
               f"`nerve --help` {m['help']:.0f} ms", "≤ 500 ms", max(table, doc) <= 500)
    report.print()


if __name__ == "__main__":
    main()
