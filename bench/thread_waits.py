"""Waiting threads: emit → the moderator of a thread waiting for that event, beside emit → a listener's compute.

THREADS threads of workflow `waiter` each end their first round with
`wait_for_event("go", match={"k": K})`. Once all wait, a client emits `go`
every 20 ms with `{"k": K, "t": monotonic_ns()}`, each event resuming exactly
one thread. Two latencies come from the same emits, in the same engine:

- the resume: the thread's moderator takes `monotonic_ns()` when it sees the
  event message, `t` subtracted: the emit's request and commit, the manager
  reading the source's new rows off the loop and matching them against every
  waiting thread, the resume written to logs.db (event message and `queued`
  row), the thread handed to its worker with its chain, the worker's step;
- the hop: sense `l` listens to `go` and takes `monotonic_ns()` first thing in
  its compute (the emit → listener figure of bench/engine_events.py).

The floor is a blocking pipe round trip, measured in this process before and
after. CLOCK_MONOTONIC is system-wide on Linux.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, instance, machine, median, pct, pipe_round_trips, query, signals, us, wait_until

THREADS = 200
WARMUP = 10
GAP = 0.020  # seconds between emits
CONFIG = """
senses:
  l: {group: g1}
reflexes:
  - {sense: l, on: [go]}
workflows:
  waiter: {concurrency: 4, max_queue: 1000}
"""
LISTENER = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    one = len(trigger.events) == 1  # a compute given several events (it was busy) has no one latency
    return {"lat": t0 - trigger.events[0].payload["t"] if one else None, "n": len(trigger.events)}
"""
WAITER = '''
import time
from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, wait_for_event

SEEN = {}  # prompt -> ns from the emit to the moderator seeing its event (a bench's side door, not a pattern)

async def waits(messages):
    return wait_for_event("go", match={"k": int(messages[0].content)})

async def done(messages):
    return RoleResult("done", {"lat": SEEN.pop(messages[0].content, None)})

def moderator(messages):
    last = messages[-1]
    if last.role == EVENT:
        SEEN[messages[0].content] = time.monotonic_ns() - last.meta["payload"]["t"]
        return "done"
    return "waits" if last.role == "__start__" else END

workflow = WorkflowDefinition(roles={"waits": waits, "done": done}, moderator=moderator)
'''


def statuses(home: Path) -> dict[str, int]:
    return dict(query(home / "data" / "logs.db", "SELECT status, count(*) FROM workflow_runs GROUP BY status"))


def resumes(home: Path) -> list[float]:
    rows = query(home / "data" / "logs.db", "SELECT json_extract(payload, '$.meta.lat') FROM logs WHERE source = "
                 "'workflow' AND type = 'message' AND json_extract(payload, '$.role') = 'done' ORDER BY id")
    return [r[0] / 1000 for r in rows if r[0] is not None]


def measure() -> tuple[list[float], list[float], int]:
    """(emit → moderator µs, emit → listener µs, threads completed)."""
    with instance(CONFIG, {"l": LISTENER}) as home:
        (home / "workflows").mkdir()
        (home / "workflows" / "waiter.py").write_text(WAITER)
        with Engine(home) as engine:
            engine.wait_ready(groups=1)
            for k in range(THREADS + WARMUP):
                engine.request("start_thread", workflow="waiter", prompt=str(k))
            wait_until(lambda: statuses(home).get("waiting", 0) == THREADS + WARMUP, 120)
            next_at = time.monotonic()
            for k in range(THREADS + WARMUP):
                next_at += GAP
                engine.request("emit", channel="go", payload={"k": k, "t": time.monotonic_ns()})
                time.sleep(max(0.0, next_at - time.monotonic()))
            wait_until(lambda: statuses(home).get("completed", 0) == THREADS + WARMUP
                       and sum(s["payload"]["n"] for s in signals(home, "l")) >= THREADS + WARMUP, 120)
            done = statuses(home).get("completed", 0)
        resumed = resumes(home)
        heard = [s["payload"]["lat"] / 1000 for s in signals(home, "l") if s["payload"]["lat"] is not None]
    return resumed[WARMUP:], heard[WARMUP:], done


def main() -> None:
    floor = pipe_round_trips()
    resumed, heard, done = measure()
    floor += pipe_round_trips()
    report = Report(f"waiting threads: emit → the waiting thread's moderator, beside emit → listener ({machine()})")
    report.row("raw pipe round trip, blocking, median", us(median(floor)))
    if resumed and heard:
        report.row("emit → the waiting thread's moderator, median / p99", f"{us(median(resumed))} / {us(pct(resumed, 99))}",
                   f"emit → listener {us(median(heard))} / {us(pct(heard, 99))}", "median ≤ 10× the listener's",
                   median(resumed) <= 10 * median(heard))
        report.row("samples (resumes / listener computes), threads completed",
                   f"{len(resumed):,} / {len(heard):,}, {done:,} of {THREADS + WARMUP:,}", "", "all",
                   done == THREADS + WARMUP)
    else:
        report.row("emit → the waiting thread's moderator", "no samples", "", "", False)
    report.note(f"{THREADS + WARMUP} threads waited at once on one channel, each for its own `k` (the first "
                f"{WARMUP} are warm-up); one emit every {GAP * 1000:.0f} ms (a latency figure: at 5 ms on a "
                "loaded machine the resumes queued behind each other)")
    report.print()


if __name__ == "__main__":
    main()
