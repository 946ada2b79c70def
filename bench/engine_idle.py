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
Targets: kernel < 0.5% CPU, kernel RSS < 60 MiB, idle worker RSS ≤ 15 MiB.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, count_logs, instance, machine, wait_until

SENSES = 20
GROUPS = 4
SETTLE = 3.0
WINDOW = 12.0
MIB = 2**20

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


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid`, in ns."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total


def ctx_switches(proc: psutil.Process) -> int:
    ctx = proc.num_ctx_switches()
    return ctx.voluntary + ctx.involuntary


class Usage:
    """One process over the window: CPU %, context switches/s, peak RSS and USS."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.cpu0, self.ctx0, self.t0 = cpu_ns(pid), ctx_switches(self.proc), time.monotonic()
        self.rss = self.uss = 0
        self.cpu = self.ctx = 0.0
        self.poll()

    def poll(self) -> None:
        mem = self.proc.memory_full_info()
        self.rss, self.uss = max(self.rss, mem.rss), max(self.uss, mem.uss)

    def finish(self) -> None:
        wall = time.monotonic() - self.t0
        self.cpu = (cpu_ns(self.proc.pid) - self.cpu0) / 1e9 / wall * 100
        self.ctx = (ctx_switches(self.proc) - self.ctx0) / wall


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
                workers = [p.pid for p in psutil.Process(engine.pid).children()]
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
    big = max(workers, key=lambda w: w.rss)
    floor_mem = f"{python.rss / MIB:.1f} MiB ({python.uss / MIB:.1f}) bare python"
    report = Report(f"idle cost: {SENSES} senses on 10s intervals in {GROUPS} groups, {WINDOW:g}s window ({machine()})")
    report.row("kernel CPU", f"{kernel.cpu:.3f}%", f"{loop.cpu:.3f}% (asyncio, 20 timers)", "< 0.5%", kernel.cpu < 0.5)
    report.row("kernel context switches", f"{kernel.ctx:.1f}/s", f"{loop.ctx:.1f}/s", "no polling loop")
    report.row("kernel RSS (USS)", f"{kernel.rss / MIB:.1f} MiB ({kernel.uss / MIB:.1f})", floor_mem, "< 60 MiB",
               kernel.rss < 60 * MIB)
    report.row(f"worker RSS (USS), largest of {len(workers)}", f"{big.rss / MIB:.1f} MiB ({big.uss / MIB:.1f})",
               floor_mem, "≤ 15 MiB", big.rss <= 15 * MIB)
    report.row("worker CPU, each", " / ".join(f"{w.cpu:.3f}%" for w in workers))
    report.row("worker context switches, each", " / ".join(f"{w.ctx:.1f}" for w in workers) + " /s")
    report.row("computes in the window", f"{runs} (expected ≈ {SENSES * WINDOW / 10:.0f})")
    report.print()


if __name__ == "__main__":
    main()
