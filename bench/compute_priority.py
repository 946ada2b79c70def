"""Priority: a person's compute in a group with 50 background computes queued (groups.G.concurrency: 1).

51 `low` senses of one group (`concurrency: 1`) listen to one channel; each compute takes 20 ms. An emit
makes one of them run and 50 wait in the group's queue; then `compute` of another sense of the group is
asked on the control socket (urgent, as `nerve sense compute` is) and timed to its answer. It goes first:
it waits only for the background compute already running. Floor, same run: the same request with no
queue (the group idle). Goal: median ≤ floor + one background compute (20 ms) + 10 ms.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import tempfile

from _kit import goal
from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli.ops.client import request

BACKGROUND = 51  # one runs, 50 wait
WORK_MS = 20
ROUNDS = 10
SLOW = f"import time\n\ndef compute(db, peers):\n    time.sleep({WORK_MS / 1000})\n    return 1\n"
QUICK = "def compute(db, peers):\n    return 1\n"


def asked_ms(home: Path) -> float:
    started = time.perf_counter()
    answer = request(home, "compute", sense="asked")
    assert answer["outcome"] == "signal", answer
    return (time.perf_counter() - started) * 1000


def main() -> None:
    names = [f"bg-{i:02}" for i in range(BACKGROUND)]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        senses = "\n".join(f"  {n}: {{group: work, priority: low}}" for n in names)
        reflexes = "\n".join(f"  - {{sense: {n}, on: [go]}}" for n in names)
        write_instance(home, f"groups:\n  work: {{concurrency: 1}}\nsenses:\n  asked: {{group: work}}\n{senses}\n"
                             f"reflexes:\n{reflexes}\n", {"asked": QUICK, **{n: SLOW for n in names}})
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=1)
            floor = [asked_ms(home) for _ in range(ROUNDS + 2)][2:]  # the first two warm the path
            waits, done = [], 0
            for _ in range(ROUNDS):
                request(home, "emit", channel="go", payload=1)
                wait_for(lambda: sum(1 for s in engine.status()["senses"].values()
                                     if s.get("queued_priority") == "low") >= BACKGROUND - 1, 30, interval=0.002)
                waits.append(asked_ms(home))
                done += BACKGROUND
                wait_for(lambda: sum(1 for r in read_logs(home, "reflex", "run_complete") if r["ref"] in names)
                         >= done, 60)
            engine.stop()
    load = os.getloadavg()[0]
    med, floor_med = statistics.median(waits), statistics.median(floor)
    limit = floor_med + WORK_MS + 10
    print(f"a person's compute with {BACKGROUND - 1} background computes queued: median {med:.1f} ms, max "
          f"{max(waits):.1f} ms over {ROUNDS} rounds (load {load:.1f})")
    print(f"  floor: the same compute with no queue {floor_med:.1f} ms; one background compute takes {WORK_MS} ms")
    goal("a person's compute with 50 queued, median", f"{med:.1f} ms", f"no queue {floor_med:.1f} ms",
         f"≤ floor + {WORK_MS} ms + 10 ms = {limit:.1f} ms", med <= limit)


if __name__ == "__main__":
    main()
