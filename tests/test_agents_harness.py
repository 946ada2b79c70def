"""Coding agents woken exactly once: a harness loop running `nerve agent wait` as its asyncRewake hook.

The harness is the simulator of Claude Code's hook protocol (harnesssim.py:
settings file, stdin JSON, exit 2 wakes, Stop after each turn); the hook is
the real `nerve agent wait`, installed by the real `nerve agent install
claude`; the engine is the real `nerve run`, killed -9 once. Each exit 2 the
harness turns into a turn is one line of its log.
"""

from __future__ import annotations

import signal

import pytest
from agentkit import Sim, ended, install_claude, turns
from enginekit import RunningEngine, wait_for, write_instance

from nerve_cli.ops.emit import emit_event

CONFIG = """
agents:
  coder: {on: [ci.done], batch: 1}
"""


def _emit(home, first: int, last: int) -> None:
    for n in range(first, last + 1):
        emit_event(home, "ci.done", {"n": n})


def _completed(log) -> dict[int, dict]:
    """Delivery id → its first completed turn: how a harness dedupes (the id is the same when handed again)."""
    out: dict[int, dict] = {}
    for turn in ended(log):
        out.setdefault(turn["delivery"], turn)
    return out


def _heard(log) -> list[int]:
    return sorted(int(e.split("#")[1]) for t in _completed(log).values() for e in t["events"])


@pytest.mark.timeout(400)
def test_a_hundred_events_across_harness_restarts_and_a_kernel_kill_are_a_hundred_turns(home, tmp_path):
    write_instance(home, CONFIG, {})
    project, log = tmp_path / "project", tmp_path / "turns.jsonl"
    install_claude(home, "coder", project)  # the agent's first look: what comes from now on is its news
    engine = RunningEngine(home)
    try:
        engine.wait_ready(groups=0)
        sim = Sim(project, log, "s1")
        _emit(home, 1, 25)  # through the engine
        wait_for(lambda: len(_completed(log)) >= 10, 60, what="ten turns")
        sim.kill()  # restart 1: mid-wait or mid-turn, whatever the moment is
        sim = Sim(project, log, "s2")
        wait_for(lambda: len(_completed(log)) >= 20, 60, what="twenty turns")
        engine.stop(signal.SIGKILL)  # the kernel dies; the agent's inbox is the files, not the engine
        _emit(home, 26, 45)  # stored by `nerve emit` itself, no engine running
        wait_for(lambda: len(_completed(log)) >= 30, 60, what="thirty turns")
        sim.kill()  # restart 2: now no harness and no engine run
        _emit(home, 46, 60)
        sim = Sim(project, log, "s3")  # the next session hears what came meanwhile
        engine = RunningEngine(home)
        engine.wait_ready(groups=0)
        _emit(home, 61, 100)
        wait_for(lambda: len(_completed(log)) >= 70, 120, what="seventy turns")
        sim.kill()  # restart 3
        sim = Sim(project, log, "s4")
        wait_for(lambda: len(_completed(log)) >= 100, 120, what="a hundred turns")
        sim.kill()
    finally:
        engine.stop()
    done = _completed(log)
    assert _heard(log) == list(range(1, 101)), "each event in exactly one delivery: 0 lost, 0 twice"
    assert len(done) == 100, "a hundred turns (batch: 1)"
    # a delivery handed again (its turn cut short, its Stop hook killed with the harness before it could
    # acknowledge, or handed to a harness that died before it read it) came with the same id and the same
    # events, marked as handed before
    for turn in turns(log):
        assert turn["events"] == done[turn["delivery"]]["events"]
    seen: set[int] = set()
    for turn in [t for t in turns(log) if t["t"] == "start"]:
        assert turn["redelivered"] or turn["delivery"] not in seen, turn
        seen.add(turn["delivery"])
