"""Workflow threads: threads per second and the overhead of one round, through the real machinery.

A WorkflowManager (in this process, with its own LogStore on a temp instance)
drives a real workflow worker. The workflow is trivial: two roles that return
at once, so what is measured is Nerve's own cost.

- threads/s: N threads of 2 rounds each, all launched at once (overflow:
  queue), until the last one's `completed` row is written; at concurrency 1
  and 8. Each thread costs: queued + started + start message rows, two rounds,
  the end row, and the ThreadStart/ThreadEnd lines.
- per-round overhead: one thread of many rounds; the gap between consecutive
  `message` events in the kernel. A round is: the worker's ThreadMessage line,
  the kernel's log row committed (flush), the Ack line back, then the
  moderator and the role. Floor: a blocking JSON-lines round trip to a trivial
  echo child, measured in the same run. A round costs the same at round 2,000
  as at round 2: neither side counts the chain's rounds again per round.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import PINGPONG_WORKFLOW, Report, goal, machine, median, pct, pipe_round_trips, us

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.logs import LogStore

THREADS = 400
ROUNDS = 2000


def instance(root: Path, concurrency: int) -> tuple[Path, NerveConfig]:
    home = root / f"c{concurrency}"
    (home / "workflows").mkdir(parents=True)
    (home / "workflows" / "pp.py").write_text(PINGPONG_WORKFLOW)
    config = NerveConfig.model_validate({
        "engine": {"max_rounds": ROUNDS},
        "workflows": {"pp": {"concurrency": concurrency, "overflow": "queue", "max_queue": THREADS * 2}},
    })
    return home, config


async def threads_per_second(home: Path, config: NerveConfig) -> float:
    logs = LogStore(home / "data" / "logs.db")
    manager = WorkflowManager(home, config, logs, lambda level, line: None)
    ended = asyncio.Event()
    done = [0]

    def listener(run_id: str, workflow: str, type_: str, payload: dict) -> None:
        if type_ in ("completed", "failed", "crashed", "dropped"):
            done[0] += 1
            if done[0] == THREADS:
                ended.set()

    manager.add_listener(listener)
    manager.launch("pp", "warm-up", 2, {})  # the worker's start-up is not part of the figure
    while done[0] < 1:
        await asyncio.sleep(0.01)
    done[0] = 0
    t0 = time.perf_counter()
    for i in range(THREADS):
        manager.launch("pp", f"thread {i}", 2, {})
    await asyncio.wait_for(ended.wait(), 120)
    elapsed = time.perf_counter() - t0
    await manager.stop(1)
    logs.close()
    return THREADS / elapsed


async def round_gaps(home: Path, config: NerveConfig) -> list[float]:
    logs = LogStore(home / "data" / "logs.db")
    manager = WorkflowManager(home, config, logs, lambda level, line: None)
    stamps: list[int] = []
    finished = asyncio.Event()

    def listener(run_id: str, workflow: str, type_: str, payload: dict) -> None:
        if type_ == "message" and payload.get("seq", 0) > 0:
            stamps.append(time.perf_counter_ns())
        elif type_ in ("completed", "failed", "crashed"):
            finished.set()

    manager.add_listener(listener)
    manager.launch("pp", "many rounds", ROUNDS, {})
    await asyncio.wait_for(finished.wait(), 120)
    await manager.stop(1)
    logs.close()
    gaps = [(b - a) / 1000 for a, b in zip(stamps, stamps[1:])]
    return gaps[100:]  # warm-up


def main() -> None:
    trips = pipe_round_trips()
    floor = median(trips)
    with tempfile.TemporaryDirectory() as tmp:
        rates = {c: asyncio.run(threads_per_second(*instance(Path(tmp), c))) for c in (1, 8)}
        gaps = asyncio.run(round_gaps(*instance(Path(tmp), 2)))
    report = Report(f"Workflow threads ({machine()})")
    report.row("threads/s, 2 rounds each, concurrency 1", f"{rates[1]:,.0f}", "", "≥ 200", rates[1] >= 200)
    report.row("threads/s, 2 rounds each, concurrency 8", f"{rates[8]:,.0f}", "", "≥ 200", rates[8] >= 200)
    med, p99 = median(gaps), pct(gaps, 99)
    met = med <= 3 * floor and p99 <= 1000
    report.row("round overhead, median", us(med), f"pipe round trip {us(floor)} ({med / floor:.1f}×)",
               "≤ 3× floor", med <= 3 * floor)
    report.row("round overhead, p99", us(p99), f"pipe round trip p99 {us(pct(trips, 99))} (the scheduler's share)",
               "≤ 1 ms", p99 <= 1000)
    goal("workflow round overhead, median / p99", f"{us(med)} / {us(p99)} = {med / floor:.1f}× the pipe",
         f"pipe round trip {us(floor)}", "≤ 3× the pipe, p99 ≤ 1 ms", met)
    report.note(f"{THREADS} threads per rate; {len(gaps)} rounds for the overhead; every message is committed "
                "to logs.db (WAL, synchronous=NORMAL) before the worker may take its next step")
    report.print()


if __name__ == "__main__":
    main()
