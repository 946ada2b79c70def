"""A worker's death is put down to the sense whose code caused it, never to a group-mate that merely computed.

Each rogue below kills (or deafens) its worker from code the kernel cannot see
on the computing thread: a background thread running library code segfaults,
a background thread calls os._exit, a compute closes every fd above 2 (the
protocol pipe among them: the worker lives on, deaf). The mate computes a
long compute at that moment. The rogue is quarantined, with why; the mate
loses its compute but is neither penalised nor quarantined; a deaf worker is
replaced at once, not after the timeout and grace of what it was computing.
"""

from __future__ import annotations

import pytest
from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli.ops.client import request

ROGUES = {
    "thread-segfault": ("""
import ctypes, threading

def compute(db, peers):
    threading.Timer(0.3, ctypes.string_at, args=(0,)).start()  # library code only on the crashing thread
    return 1
""", "a thread its code started crashed the worker"),
    "thread-exit": ("""
import os, threading

def compute(db, peers):
    threading.Timer(0.3, os._exit, args=(3,)).start()
    return 1
""", "its code called os._exit(3)"),
    "closerange": ("""
import os, time

def compute(db, peers):
    os.closerange(3, 4096)  # the protocol pipe too: the worker lives on, deaf
    time.sleep(60)
""", "closed the worker's protocol pipe"),
}
MATE = "import time\n\ndef compute(db, peers):\n    time.sleep(2)\n    return 1\n"
CONFIG = """
    engine: {quarantine_after: 1, quarantine_window: 1m, quarantine_for: 1h, failure_backoff_after: 1,
             respawn_backoff_first: 50ms}
    senses:
      rogue: {group: shared, timeout: 1m}
      mate: {group: shared, timeout: 1m}
    reflexes:
      - {sense: rogue, on: [go]}
      - {sense: mate, interval: 50ms}
"""


@pytest.mark.parametrize("kind", sorted(ROGUES))
def test_the_sense_whose_code_killed_the_worker_is_blamed_not_its_computing_mate(home, kind: str) -> None:
    code, because = ROGUES[kind]
    write_instance(home, CONFIG, {"rogue": code, "mate": MATE})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: "mate" in (engine.status()["workers"][0]["computing"] or []), 20, what="mate computing")
        request(home, "emit", channel="go")
        # far sooner than the 1m timeout (+ grace) of the computes the deaf worker held
        quarantined = wait_for(lambda: read_logs(home, "system", "quarantined"), 15, what="a quarantine")
        exits = wait_for(lambda: read_logs(home, "system", "worker_exited", "shared"), 15, what="the death")
        engine.stop()
    assert [q["ref"] for q in quarantined] == ["rogue"], quarantined
    assert because in quarantined[0]["payload"]["why"], quarantined[0]["payload"]["why"]
    assert exits[0]["payload"]["blamed"]["sense"] == "rogue", exits[0]["payload"]
    assert read_logs(home, "system", "penalised", "mate") == []
    lost = [e["payload"] for e in read_logs(home, "system", "error", "mate") if e["payload"].get("error_type") == "WorkerDied"]
    assert lost and all(e["blamed"] == "rogue" for e in lost), lost
