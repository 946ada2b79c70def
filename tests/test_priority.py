"""Priority with fairness: a group's queue (groups.G.concurrency) and a workflow's queue start higher priority
first, FIFO within a level, and with ageing low work always progresses."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from enginekit import RunningEngine, read_logs, wait_for, write_instance
from loadclock import scaled

from nerve_cli.kernel.core.priority import PriorityQueue
from nerve_cli.ops.client import request

HOLD = """
import time
from pathlib import Path

def compute(db, peers):
    gate = Path(__file__).resolve().parents[2] / "gate"
    while not gate.exists():
        time.sleep(0.01)
    return 1
"""
SLOW = "import time\n\ndef compute(db, peers):\n    time.sleep(0.05)\n    return 1\n"
QUICK = "import time\n\ndef compute(db, peers):\n    time.sleep(0.005)\n    return 1\n"


def test_the_queue_orders_by_level_then_arrival_and_ages() -> None:
    queue: PriorityQueue[tuple[str, str]] = PriorityQueue(lambda item: item[1], ageing=10.0)
    queue.append(("a", "low"), 0.0)
    queue.append(("b", "normal"), 1.0)
    queue.append(("c", "normal"), 2.0)
    queue.append(("d", "urgent"), 3.0)
    queue.append(("e", "urgent"), 31.0)  # joined 31 s after the low one: past 3 × ageing, it goes after it
    queue.appendleft(("f", "low"))
    assert [name for name, _ in queue] == ["f", "d", "b", "c", "a", "e"]
    assert queue.drop_oldest_lowest() == ("f", "low")
    assert [queue.popleft()[0] for _ in range(len(queue))] == ["d", "b", "c", "a", "e"]


def test_take_first_keeps_the_order_and_does_not_sort_the_queue_for_each_start() -> None:
    """A workflow's queue hands out its next thread with take_first at every thread's end: sorting all the
    queued ones each time made 400 queued threads cost 400 sorts (bench/workflow_threads.py, concurrency 8)."""
    queue: PriorityQueue[tuple[int, str]] = PriorityQueue(lambda item: item[1])
    for i in range(20_000):
        queue.append((i, "low" if i % 3 else "normal"), float(i) * 1e-6)
    held = {5}
    started = time.monotonic()
    taken = [queue.take_first(lambda item: item[0] not in held) for _ in range(len(queue) - 1)]
    elapsed = time.monotonic() - started
    assert [item[0] for item in taken[:3]] == [0, 3, 6]  # normal first, arrival order within a level
    assert (5, "low") not in taken and list(queue) == [(5, "low")]  # held back: passed over, kept
    assert elapsed < scaled(5.0), elapsed  # a sort per take: minutes; the heap's head: milliseconds


def _order(home: Path) -> list[str]:
    return [r["ref"] for r in read_logs(home, "reflex", "run_start")]


def test_an_on_demand_compute_starts_before_50_queued_background_computes(home: Path) -> None:
    names = [f"bg-{i:02}" for i in range(50)]
    senses = "\n".join(f"      {n}: {{group: work, priority: low}}" for n in names)
    reflexes = "\n".join(f"      - {{sense: {n}, on: [go]}}" for n in names)
    write_instance(home, f"""
    groups:
      work: {{concurrency: 1}}
    senses:
      holder: {{group: work}}
      asked: {{group: work}}
{senses}
    reflexes:
      - {{sense: holder, on: [hold]}}
{reflexes}
    """, {"holder": HOLD, "asked": QUICK, **{n: QUICK for n in names}})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        request(home, "emit", channel="hold", payload=1)
        wait_for(lambda: "holder" in _order(home), 20, what="the holder taking the group's one slot")
        request(home, "emit", channel="go", payload=1)

        def queued() -> list[str]:
            return [n for n, s in engine.status()["senses"].items() if s.get("queued_priority") == "low"]
        wait_for(lambda: len(queued()) == 50, 20, what="50 background computes queued")
        assert {s["state"] for n, s in engine.status()["senses"].items() if n in names} == {"pending"}
        asked = subprocess.Popen([sys.executable, "-m", "nerve_cli", "sense", "compute", "asked", "--home",
                                  str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: engine.status()["senses"]["asked"].get("queued_priority") == "urgent", 20,
                 what="the person's compute queued, urgent")
        # a person asks for a sense whose start already waits in the queue, low: that start goes first now
        again = subprocess.Popen([sys.executable, "-m", "nerve_cli", "sense", "compute", "bg-49", "--home",
                                  str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: engine.status()["senses"]["bg-49"].get("queued_priority") == "urgent", 20,
                 what="the queued low compute promoted")
        (home / "gate").write_text("")
        assert asked.wait(60) == 0, asked.stderr.read() if asked.stderr else ""
        assert again.wait(60) == 0, again.stderr.read() if again.stderr else ""
        wait_for(lambda: len([r for r in read_logs(home, "reflex", "run_complete") if r["ref"] in names]) == 51,
                 60, what="every background compute to finish")
        order = [name for name in _order(home) if not name.startswith("nerve-")]
        # the persons' computes went first, then the other 49 in their order (bg-49 once more: asked while queued)
        assert order[:3] == ["holder", "asked", "bg-49"]
        assert sorted(set(order[3:])) == names
        engine.stop()


def test_low_work_progresses_while_high_work_keeps_coming(home: Path) -> None:
    write_instance(home, """
    engine: {priority_ageing: 200ms}
    groups:
      work: {concurrency: 1}
    senses:
      busy: {group: work, priority: high}
      busy2: {group: work, priority: high}
      lowly: {group: work, priority: low}
    reflexes:
      - {sense: busy, on: [h]}
      - {sense: busy2, on: [h]}
      - {sense: lowly, on: [l]}
    """, {"busy": SLOW, "busy2": SLOW, "lowly": QUICK})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        stop = threading.Event()

        def stream() -> None:  # high work keeps coming: a busy compute is always pending behind the running one
            while not stop.is_set():
                request(home, "emit", channel="h", payload=1)
                time.sleep(0.01)
        feeder = threading.Thread(target=stream)
        feeder.start()
        try:
            wait_for(lambda: _order(home).count("busy") >= 3, 20, what="high work flowing")
            request(home, "emit", channel="l", payload=0)
            queued_at, busy_before = time.time(), _order(home).count("busy")
            # without ageing the low compute starves for as long as high work comes (two high senses: one is
        # always pending while the other runs)
            wait_for(lambda: "lowly" in _order(home), 20, what="the low compute to start while high work comes")
            ran = time.time() - queued_at
        finally:
            stop.set()
            feeder.join()
        order = _order(home)
        assert order[:order.index("lowly")].count("busy") - busy_before >= 1  # high work went first meanwhile
        # passed only by high computes that joined within 2 × ageing (400 ms) of it (plus the log's batching)
        assert ran < 5.0, ran
        print(f"low compute started {ran:.2f}s after it was queued")
        engine.stop()
