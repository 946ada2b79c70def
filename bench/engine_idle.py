"""Idle cost: the kernel's CPU and memory with 20 senses on 10 s intervals, and each worker's memory.

Nothing polls: between two due computes the kernel should sleep in one timer.
We start the engine, let start-up settle (every sense runs once at start: it
has never completed), then watch each process over a window: CPU% (from
/proc/<pid>/task/*/schedstat, ns-precise; psutil's cpu_times tick at 10 ms),
context switches per second (a polling loop shows up there first), and peak
RSS and USS (RSS counts shared library pages; USS is what one more process
really costs).

Floors, watched in the same window beside the engine: an asyncio process
holding the same 20 timers (CPU, wake-ups) and a bare `python` with sqlite3 +
json imported (memory).
Targets: kernel < 0.5% CPU and no polling loop (≤ 25 wake-ups/s beyond 4 per
compute), kernel RSS < 60 MiB, idle worker PSS ≤ 1.6× a bare python's.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, count_logs, family, instance, machine, wait_until

SENSES = 20
GROUPS = 4
SETTLE = 3.0
WINDOW = 12.0
MIB = 2**20
# per second with nothing due: the file watcher checks its queue every 50 ms (20/s, so a saved file reloads
# within ~75 ms); a busy poll needs many more
MAX_WAKEUPS = 25
WAKEUPS_PER_COMPUTE = 4  # answer read, log flush timer, flush thread, flush done

TRIVIAL = "def compute(db, peers):\n    return 1\n"

# the CPU floor: an event loop with the same 20 timers at 10 s, doing nothing else
TIMERS_CHILD = """
import asyncio, sqlite3, json
async def idle():
    loop = asyncio.get_running_loop()
    def tick(i):
        loop.call_later(10.0, tick, i)
    for i in range(20):
        loop.call_later(10.0 * i / 20, tick, i)
    await asyncio.sleep(3600)
asyncio.run(idle())
"""
BARE_CHILD = "import sqlite3, json, time; time.sleep(3600)"


def config() -> tuple[str, dict[str, str]]:
    names = [(f"g{i % GROUPS}", f"s{i:02d}") for i in range(SENSES)]
    lines = ["senses:"] + [f"  {n}: {{group: {g}}}" for g, n in names]
    lines += ["reflexes:"] + [f"  - {{sense: {n}, interval: 10s}}" for _, n in names]
    return "\n".join(lines) + "\n", {n: TRIVIAL for _, n in names}


def threads(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of `pid`: (CPU ns, context switches). psutil's cpu_times tick at 10 ms and its
    context switch count covers the main thread only: a polling helper thread would hide there."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu = int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that just ended
        out[int(task.name)] = (cpu, sum(int(line.split()[1]) for line in status if "ctxt_switches" in line))
    return out


class Usage:
    """One process over the window: CPU %, context switches/s (all threads), peak RSS and USS,
    and the busiest thread besides the main one."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.start, self.t0 = threads(pid), time.monotonic()
        self.rss = self.uss = self.pss = 0
        self.cpu = self.ctx = self.helper_cpu = self.helper_ctx = 0.0
        self.poll()

    def poll(self) -> None:
        mem = self.proc.memory_full_info()
        self.rss, self.uss, self.pss = max(self.rss, mem.rss), max(self.uss, mem.uss), max(self.pss, mem.pss)

    def finish(self) -> None:
        wall = time.monotonic() - self.t0
        end = threads(self.proc.pid)
        delta = {tid: (cpu - self.start.get(tid, (0, 0))[0], ctx - self.start.get(tid, (0, 0))[1])
                 for tid, (cpu, ctx) in end.items()}
        self.cpu = sum(d[0] for d in delta.values()) / 1e9 / wall * 100
        self.ctx = sum(d[1] for d in delta.values()) / wall
        helpers = [d for tid, d in delta.items() if tid != self.proc.pid]
        if helpers:
            busiest = max(helpers)
            self.helper_cpu, self.helper_ctx = busiest[0] / 1e9 / wall * 100, busiest[1] / wall


def watch(pids: list[int], seconds: float) -> list[Usage]:
    usages = [Usage(p) for p in pids]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)
        for usage in usages:
            usage.poll()
    for usage in usages:
        usage.finish()
    return usages


def measure() -> tuple[Usage, list[Usage], Usage, Usage, int]:
    """(kernel, workers, timers floor, bare python floor, computes in the window)."""
    text, senses = config()
    timers = subprocess.Popen([sys.executable, "-c", TIMERS_CHILD])
    bare = subprocess.Popen([sys.executable, "-c", BARE_CHILD])
    try:
        with instance(text, senses) as home:
            with Engine(home) as engine:
                engine.wait_ready(groups=GROUPS)
                wait_until(lambda: count_logs(home, "run_complete") >= SENSES, 15)
                time.sleep(SETTLE)
                workers = family(engine.pid)[1:]  # not the warm template: it only forks them
                before = count_logs(home, "run_complete")
                kernel, *rest, loop, python = watch([engine.pid, *workers, timers.pid, bare.pid], WINDOW)
                runs = count_logs(home, "run_complete") - before
    finally:
        for child in (timers, bare):
            child.kill()
            child.wait()
    return kernel, rest, loop, python, runs


def main() -> None:
    kernel, workers, loop, python, runs = measure()
    big = max(workers, key=lambda w: w.pss)
    floor_mem = f"{python.rss / MIB:.1f} MiB ({python.uss / MIB:.1f}) bare python"
    report = Report(f"idle cost: {SENSES} senses on 10s intervals in {GROUPS} groups, {WINDOW:g}s window ({machine()})")
    report.row("kernel CPU", f"{kernel.cpu:.3f}%", f"{loop.cpu:.3f}% (asyncio, 20 timers)", "< 0.5%", kernel.cpu < 0.5)
    allowed = MAX_WAKEUPS + WAKEUPS_PER_COMPUTE * runs / WINDOW
    report.row("kernel wake-ups (context switches, all threads)", f"{kernel.ctx:.1f}/s", f"{loop.ctx:.1f}/s",
               f"≤ {allowed:.0f}/s ({MAX_WAKEUPS} + {WAKEUPS_PER_COMPUTE} per compute)", kernel.ctx <= allowed)
    report.row("  of which its busiest helper thread", f"{kernel.helper_cpu:.3f}% CPU, {kernel.helper_ctx:.1f}/s")
    report.row("kernel RSS (USS)", f"{kernel.rss / MIB:.1f} MiB ({kernel.uss / MIB:.1f})", floor_mem, "< 60 MiB",
               kernel.rss < 60 * MIB)
    # a warm worker's RSS counts the pages it shares with the template and its siblings: PSS divides them
    report.row(f"worker PSS (RSS, USS), largest of {len(workers)}",
               f"{big.pss / MIB:.1f} MiB ({big.rss / MIB:.1f}, {big.uss / MIB:.1f})",
               f"{python.pss / MIB:.1f} MiB PSS bare python", "PSS ≤ 1.6× bare", big.pss <= 1.6 * python.pss)
    report.row("worker CPU, each", " / ".join(f"{w.cpu:.3f}%" for w in workers))
    report.row("worker context switches, each", " / ".join(f"{w.ctx:.1f}" for w in workers) + " /s")
    report.row("computes in the window", f"{runs}")
    if kernel.helper_ctx > 25:
        report.note(f"a kernel helper thread wakes {kernel.helper_ctx:.0f}×/s with nothing to do: a polling loop "
                    "(the file watcher: watchfiles' Rust loop sleeps `step` ms between checks)")
    report.print()


if __name__ == "__main__":
    main()
