"""Resource watchdog: its cost on the kernel, and how fast it stops a worker over its limit.

1. Kernel CPU% with 10 idle sense workers, without limits and with memory+CPU
   limits on all 10 (the sampler runs every 250 ms per limited worker).
2. A sense that allocates 16 MiB every 10 ms under a 200 MB limit: time from
   the moment its resident set crossed the limit (read by the sense itself
   from /proc/self/statm) to the kernel seeing the worker gone.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli.ops.client import request

IDLE = "def compute(db, peers):\n    return 1\n"
HOG = """
import os, time

PAGE = os.sysconf("SC_PAGE_SIZE")

def compute(db, peers):
    hoard = []
    log = open(os.environ.get("HOG_LOG", "/dev/null"), "a", buffering=1)
    while True:
        hoard.append(bytearray(16 * 1024 * 1024))
        rss = int(open("/proc/self/statm").read().split()[1]) * PAGE
        log.write(f"{time.time()} {rss}\\n")
        time.sleep(0.01)
"""
WORKERS = 10
SECONDS = 8.0


def kernel_cpu(limits: bool) -> float:
    groups = "".join(f"  g{i}: {{memory_limit: 1GB, cpu_limit: 90%}}\n" for i in range(WORKERS)) if limits else ""
    senses = "".join(f"  s{i}: {{group: g{i}}}\n" for i in range(WORKERS))
    reflexes = "".join(f"  - {{sense: s{i}, interval: 10s}}\n" for i in range(WORKERS))
    config = (f"groups:\n{groups}" if limits else "") + f"senses:\n{senses}reflexes:\n{reflexes}"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_instance(home, config, {f"s{i}": IDLE for i in range(WORKERS)})
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=WORKERS, timeout=60)
            time.sleep(1.0)  # let start-up settle before measuring
            proc = psutil.Process(engine.proc.pid)
            before, t0 = proc.cpu_times(), time.perf_counter()
            time.sleep(SECONDS)
            after, t1 = proc.cpu_times(), time.perf_counter()
            engine.stop()
    used = (after.user - before.user) + (after.system - before.system)
    return used / (t1 - t0) * 100


def breach_to_kill() -> list[float]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        hog_log = Path(tmp) / "hog.log"
        os.environ["HOG_LOG"] = str(hog_log)
        write_instance(home, """
            groups:
              greedy: {memory_limit: 200MB}
            senses:
              hog: {group: greedy, timeout: 1m}
            reflexes:
              - {sense: hog, on: [go]}
        """, {"hog": HOG})
        with RunningEngine(home) as engine:
            for attempt in range(1, 6):
                engine.wait_ready()
                hog_log.write_text("")
                request(home, "emit", channel="go")
                wait_for(lambda: len(read_logs(home, "system", "worker_exited", "greedy")) >= attempt, 30)
                exited = read_logs(home, "system", "worker_exited", "greedy")[-1]["ts"] / 1000
                crossed = next(float(t) for t, rss in (line.split() for line in hog_log.read_text().splitlines())
                               if int(rss) > 200_000_000)
                out.append((exited - crossed) * 1000)
                request(home, "reset", sense="hog")
            engine.stop()
    return out


def main() -> None:
    without = kernel_cpu(limits=False)
    with_limits = kernel_cpu(limits=True)
    print(f"kernel CPU with {WORKERS} idle workers over {SECONDS:g}s: no limits {without:.2f}%, "
          f"memory+CPU limits on all {with_limits:.2f}% (watchdog cost {with_limits - without:+.2f} points)")
    delays = breach_to_kill()
    print(f"limit breach → worker gone: median {statistics.median(delays):.0f} ms, max {max(delays):.0f} ms "
          f"over {len(delays)} breaches (sampling every 250 ms)")


if __name__ == "__main__":
    main()
