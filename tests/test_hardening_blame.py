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


# Deaths no sense's code shows in: each from code the worker cannot see (libc called directly, a raw thread, the
# fatal-error dump off). The worker dies again at each compute; nobody can be named, so after quarantine_after
# such deaths the whole group is quarantined, with a message saying so, instead of a crash loop.
UNNAMEABLE = {
    "raw-thread-libc-exit": """
import _thread, ctypes, time

def compute(db, peers):
    _thread.start_new_thread(ctypes.CDLL(None)._exit, (3,))
    time.sleep(5)
""",
    "raw-thread-sigsegv": """
import _thread, ctypes, os, time

def compute(db, peers):
    _thread.start_new_thread(ctypes.CDLL(None).kill, (os.getpid(), 11))
    time.sleep(5)
""",
    "segfault-no-faulthandler": """
import ctypes, faulthandler

def compute(db, peers):
    faulthandler.disable()
    ctypes.string_at(0)
""",
    "close-range-syscall": """
import ctypes, time

def compute(db, peers):
    ctypes.CDLL(None, use_errno=True).syscall(436, 3, 0xFFFFFFFF, 0)  # close_range(3, ~0, 0), not os.closerange
    time.sleep(60)
""",
    "libc-dup2": """
import ctypes, os, time

def compute(db, peers):
    null, libc = os.open(os.devnull, os.O_RDWR), ctypes.CDLL(None)
    for fd in range(3, 1024):
        if fd != null:
            libc.dup2(null, fd)  # over the protocol's fds too, past os.dup2's guard
    time.sleep(60)
""",
}
UNNAMEABLE_CONFIG = """
    engine: {quarantine_after: 2, quarantine_window: 1m, quarantine_for: 1h, respawn_backoff_first: 50ms}
    senses:
      rogue: {group: shared, timeout: 1m}
      mate: {group: shared, timeout: 1m}
      apart: {group: own}
    reflexes:
      - {sense: rogue, interval: 50ms}
      - {sense: mate, interval: 50ms}
      - {sense: apart, interval: 50ms}
"""


@pytest.mark.parametrize("kind", sorted(UNNAMEABLE))
def test_deaths_no_sense_can_be_named_quarantine_the_group_instead_of_a_crash_loop(home, kind: str) -> None:
    write_instance(home, UNNAMEABLE_CONFIG, {"rogue": UNNAMEABLE[kind], "mate": MATE, "apart": MATE})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        quarantined = wait_for(lambda: len(read_logs(home, "system", "quarantined")) >= 2 and
                               read_logs(home, "system", "quarantined"), 40, what="the group's quarantine")
        # the second death's worker_exited row may be in a later log flush than the quarantine it caused
        exits = wait_for(lambda: len(found := read_logs(home, "system", "worker_exited", "shared")) >= 2 and found,
                         10, what="both deaths' worker_exited rows")
        status = engine.status()["senses"]
        engine.stop()
    assert sorted(q["ref"] for q in quarantined) == ["mate", "rogue"], quarantined
    why = quarantined[0]["payload"]["why"]
    assert "worker group shared" in why and "no sense's code could be named" in why, why
    assert "give each sense a group of its own" in why, why
    assert len(exits) == 2 and all(x["payload"]["blamed"] is None for x in exits), exits  # named nobody, then stopped
    assert status["rogue"]["state"] == status["mate"]["state"] == "quarantined", status
    assert status["apart"]["state"] != "quarantined"  # another group is not touched


def test_a_compute_holding_the_gil_is_blamed_for_the_mate_it_starved_past_its_grace(home) -> None:
    """A catastrophic regex holds Python's lock for minutes: the mate's short compute cannot come back from its
    sleep, runs past its timeout and grace, and the worker is killed — for the regex's sense, not the mate's."""
    write_instance(home, """
        engine: {quarantine_after: 1, quarantine_window: 1m, quarantine_for: 1h, failure_backoff_after: 1}
        senses:
          rogue: {group: shared, timeout: 10m}
          mate: {group: shared, timeout: 1s, grace_period: 1s}
        reflexes:
          - {sense: rogue, on: [go]}
          - {sense: mate, interval: 50ms}
    """, {"rogue": "import re\n\ndef compute(db, peers):\n    return bool(re.match(r'(a+)+$', 'a' * 40 + 'b'))\n",
          "mate": "import time\n\ndef compute(db, peers):\n    time.sleep(0.2)\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: read_logs(home, "reflex", "run_complete", "mate"), 20, what="a compute of mate")
        request(home, "emit", channel="go")
        killed = wait_for(lambda: read_logs(home, "system", "worker_killed", "shared"), 30, what="the grace kill")
        quarantined = wait_for(lambda: read_logs(home, "system", "quarantined"), 15, what="the quarantine")
        engine.stop()
    assert killed[0]["payload"]["sense"] == "rogue", killed
    assert "held the CPU" in killed[0]["payload"]["why"] and "mate's compute" in killed[0]["payload"]["why"], killed
    assert [q["ref"] for q in quarantined] == ["rogue"], quarantined
    assert read_logs(home, "system", "quarantined", "mate") == []
