"""Timer lateness of interval senses: how long after its due time a compute starts.

Ten senses on 100–250 ms intervals run for ~10 s in two groups. The kernel
logs `lateness_ms` (start time − due time, due = last completion + interval)
in every `reflex/run_start` payload; we read them back from logs.db. Due
times are absolute, so lateness must not accumulate: the first and the last
third of the run are compared.

The floor, same run and same window: a plain asyncio child holding the same
ten intervals with `loop.call_at` on absolute deadlines, measuring its own
lateness the same way.
Target: p99 ≤ 5 ms, and the last third no later than the first.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, instance, logs, machine, median, pct

SENSES = 10
RUN_FOR = 10.0
TRIVIAL = "def compute(db, peers):\n    return 1\n"


def interval_ms(i: int) -> int:
    return 100 + i * 150 // (SENSES - 1)  # 100 … 250 ms


FLOOR_CHILD = f"""
import asyncio, json, sys, time

async def run():
    loop = asyncio.get_running_loop()
    late = []
    def fire(i, due):
        now = time.time()
        late.append((now, (now - due) * 1000))
        nxt = now + ({{intervals}}[i] / 1000)  # like the engine: the next due counts from this run
        loop.call_at(loop.time() + (nxt - time.time()), fire, i, nxt)
    for i in range({SENSES}):
        due = time.time()
        loop.call_at(loop.time(), fire, i, due)
    await asyncio.sleep(float(sys.argv[1]))
    print(json.dumps(late))

asyncio.run(run())
"""


def config() -> str:
    lines = ["senses:"] + [f"  i{i}: {{group: g{i % 2}}}" for i in range(SENSES)]
    lines += ["reflexes:"] + [f"  - {{sense: i{i}, interval: {interval_ms(i)}ms}}" for i in range(SENSES)]
    return "\n".join(lines) + "\n"


def thirds(samples: list[tuple[float, float]]) -> tuple[list[float], list[float], list[float]]:
    """(all, first third, last third) of lateness values, split by when they happened."""
    if not samples:
        return [], [], []
    start, end = samples[0][0], samples[-1][0]
    span = max(end - start, 1e-9)
    first = [v for t, v in samples if t - start < span / 3]
    last = [v for t, v in samples if t - start >= 2 * span / 3]
    return [v for _, v in samples], first, last


def measure() -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(engine samples, floor samples), each (time s, lateness ms), in time order."""
    intervals = [interval_ms(i) for i in range(SENSES)]
    with instance(config(), {f"i{i}": TRIVIAL for i in range(SENSES)}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=2)
            child = subprocess.Popen([sys.executable, "-c", FLOOR_CHILD.replace("{intervals}", repr(intervals)),
                                      str(RUN_FOR)], stdout=subprocess.PIPE, text=True)
            floor = [tuple(x) for x in json.loads(child.communicate(timeout=RUN_FOR + 30)[0])]
            t_end = time.time()
        rows = [r for r in logs(home, "run_start") if r["payload"].get("reason") == "interval"]
        t_start = t_end - RUN_FOR
        engine_samples = [(r["ts"] / 1000, r["payload"]["lateness_ms"]) for r in rows
                          if t_start <= r["ts"] / 1000 <= t_end and r["ref"] != "nerve-health"]
    return engine_samples, floor[SENSES:]  # the floor's first round is "due now"


def main() -> None:
    engine_samples, floor_samples = measure()
    values, first, last = thirds(engine_samples)
    fvalues, ffirst, flast = thirds(floor_samples)
    report = Report(f"timer lateness: {SENSES} interval senses at 100–250 ms for {RUN_FOR:g}s ({machine()})")
    report.row("interval computes measured", f"{len(values)}", f"{len(fvalues)} timer fires")
    if not values:
        report.row("lateness p99", "no interval computes", "", "≤ 5 ms", False)
        report.print()
        return
    report.row("lateness p50", f"{median(values):.2f} ms", f"{median(fvalues):.2f} ms (asyncio call_at)")
    report.row("lateness p99", f"{pct(values, 99):.2f} ms", f"{pct(fvalues, 99):.2f} ms", "≤ 5 ms", pct(values, 99) <= 5)
    report.row("lateness max", f"{max(values):.2f} ms", f"{max(fvalues):.2f} ms")
    report.row("first third p50 / p99", f"{median(first):.2f} / {pct(first, 99):.2f} ms",
               f"{median(ffirst):.2f} / {pct(ffirst, 99):.2f} ms")
    grows = median(last) > median(first) + 1.0
    report.row("last third p50 / p99", f"{median(last):.2f} / {pct(last, 99):.2f} ms",
               f"{median(flast):.2f} / {pct(flast, 99):.2f} ms", "p50 ≤ first third's + 1 ms", not grows)
    expected = sum(RUN_FOR * 1000 / interval_ms(i) for i in range(SENSES))
    report.row("computes per second", f"{len(values) / RUN_FOR:.1f}/s",
               f"≤ {expected / RUN_FOR:.1f}/s if computes took no time")
    report.print()


if __name__ == "__main__":
    main()
