"""Throughput: trivial computes per second through the real engine, logging on.

Each sense listens to itself (`- {sense: tN, on: [tN]}`), so it runs again as
soon as its previous compute completes. Several such senses in one group keep
one worker busy (pipelining through its one pipe); the same senses spread
over several groups measure what the kernel can drive across workers. Every
compute writes its `_signals` row and the kernel logs run_start + run_complete
(batched into logs.db). We count completed computes over a measured window
after a warm-up by the engine's own count of each sense's runs (`nerve status`), not by logs.db's
`run_complete` rows, which are written behind.

The floor is the rate of raw JSON-lines round trips to a trivial echo child
(one at a time, blocking pipes), measured in the same run.
Targets: ≥ 2,000/s through one worker, ≥ 5,000/s across groups.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, count_logs, instance, machine, median, pipe_round_trips, wait_until

WARMUP = 1.0
WINDOW = 3.0
SENSES_PER_GROUP = 4
GROUPS = 3  # for "across groups" (2 cores: more workers only add contention)

TRIVIAL = "def compute(db, peers):\n    return 1\n"


def config(groups: int, per_group: int) -> tuple[str, dict[str, str]]:
    names = [(f"g{g}", f"t{g}x{i}") for g in range(groups) for i in range(per_group)]
    lines = ["senses:"] + [f"  {n}: {{group: {g}}}" for g, n in names]
    lines += ["reflexes:"] + [f"  - {{sense: {n}, on: [{n}, go]}}" for _, n in names]
    return "\n".join(lines) + "\n", {n: TRIVIAL for _, n in names}


def rate(groups: int, per_group: int) -> tuple[float, int]:
    """(completed computes per second in the window, how many of them)."""
    text, senses = config(groups, per_group)
    with instance(text, senses) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=groups)
            engine.request("emit", channel="go")
            wait_until(lambda: count_logs(home, "run_complete") > 0, 10)
            time.sleep(WARMUP)
            first, t0 = runs(engine, senses), time.monotonic()
            time.sleep(WINDOW)
            last, t1 = runs(engine, senses), time.monotonic()
    return (last - first) / (t1 - t0), last - first


def runs(engine: Engine, senses: dict[str, str]) -> int:
    """The computes the engine has completed so far, by its own count: logs.db's run_complete rows are written
    behind, by a thread that falls further behind the busier the kernel is (single windows counted 980 to
    8,900/s for the same code that way)."""
    status = engine.request("status")["senses"]
    return sum(status[name]["runs"] for name in senses)


def main() -> None:
    floor = 1e6 / median(pipe_round_trips())
    one, n_one = rate(1, SENSES_PER_GROUP)
    across, n_across = rate(GROUPS, SENSES_PER_GROUP)
    report = Report(f"throughput: trivial computes/s, logging on, {WINDOW:g}s window after {WARMUP:g}s warm-up ({machine()})")
    report.row("raw pipe round trips/s, one at a time", f"{floor:,.0f}/s")
    report.row(f"one worker ({SENSES_PER_GROUP} self-triggering senses)", f"{one:,.0f}/s ({n_one:,} computes)",
               f"{floor:,.0f}/s", "≥ 2,000/s", one >= 2000)
    report.row(f"across {GROUPS} groups ({GROUPS * SENSES_PER_GROUP} senses)", f"{across:,.0f}/s ({n_across:,} computes)",
               f"{floor:,.0f}/s", "≥ 5,000/s", across >= 5000)
    report.row("across groups / one worker", f"{across / one:.2f}×" if one else "-")
    if n_one < 10:
        report.note("one-worker run stalled: a sense's own signal did not start its next compute")
    report.print()


if __name__ == "__main__":
    main()
