"""Quarantine blames only the likely culprit of a worker's death, and says which sense and why."""

from __future__ import annotations

import time
from pathlib import Path

from enginekit import RunningEngine, completes, errors, read_logs, wait_for, write_instance

from nerve_cli.config.model import EngineConfig
from nerve_cli.kernel.supervision.penalty import Blame, PenaltyBook
from nerve_cli.ops.client import request
from nerve_cli.vocab.outcomes import Outcome

SEGFAULT = """
import ctypes

def compute(db, peers):
    ctypes.string_at(0)  # SIGSEGV
"""
LONG = """
import time

def compute(db, peers):
    time.sleep(3)
    return 1
"""
CONFIG = """
    engine: {quarantine_after: 2, quarantine_window: 1m, quarantine_for: 1h, failure_backoff_after: 10}
    senses:
      crasher: {group: doomed}
      neighbour: {group: doomed}
    reflexes:
      - {sense: crasher, on: [go]}
      - {sense: neighbour, interval: 50ms}
"""


def test_quarantine_blames_the_sense_on_the_crashing_thread_not_its_busy_neighbour(home: Path) -> None:
    write_instance(home, CONFIG, {"crasher": SEGFAULT, "neighbour": LONG})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for attempt in range(2):
            wait_for(lambda: "neighbour" in (engine.status()["workers"][0]["computing"] or []), 20,
                     what="the neighbour to be computing")
            request(home, "emit", channel="go")
            wait_for(lambda: len(completes(home, "crasher")) > attempt, 20, what="the crash")
        quarantined = wait_for(lambda: read_logs(home, "system", "quarantined"), 15, what="a quarantine")
        time.sleep(0.5)
        status = engine.status()["senses"]
        code, output = engine.stop()
    assert code == 0, output
    assert [q["ref"] for q in read_logs(home, "system", "quarantined")] == ["crasher"], quarantined
    why = quarantined[0]["payload"]["why"]
    assert "blamed because its code was on the crashing thread (senses/crasher/sense.py:5)" in why, why
    assert status["neighbour"]["state"] != "quarantined" and status["crasher"]["state"] == "quarantined"
    assert read_logs(home, "system", "penalised", "neighbour") == []
    lost = [e["payload"] for e in errors(home, "neighbour") if e["payload"].get("error_type") == "WorkerDied"]
    assert lost and all("likely caused by crasher" in e["message"] and e["blamed"] == "crasher" for e in lost), lost
    exits = read_logs(home, "system", "worker_exited", "doomed")
    assert exits and all(x["payload"]["blamed"]["sense"] == "crasher" for x in exits)


def _book() -> PenaltyBook:
    return PenaltyBook(EngineConfig(quarantine_after=2, quarantine_window="1m", quarantine_for="1h",
                                    failure_backoff_after=10))


def _death(book: PenaltyBook, computing: set[str], at: float, evidence: Blame | None = None) -> dict:
    blame, verdict = book.record_death("g", frozenset(computing), evidence, at)
    verdicts = {sense: book.record(sense, Outcome.LOST, at, group="g", blame=blame) for sense in sorted(computing)}
    if verdict is not None and blame is not None:
        verdicts[blame.sense] = verdict
    return verdicts


def test_quarantine_blames_nobody_for_merely_computing() -> None:
    """Two senses at every death, one alone, one common to every death: none of it is evidence."""
    book = _book()
    for at in (0.0, 1.0, 2.0):
        assert _death(book, {"a", "b"}, at) == {"a": None, "b": None}
    for at in (3.0, 4.0, 5.0):
        assert _death(book, {"a"}, at) == {"a": None}  # the only sense computing, every time
    assert book.failures == {}  # its lost computes are not its failures either: it did not cause them


def test_quarantine_blames_the_sense_whose_code_did_it_even_when_it_was_not_computing() -> None:
    book = _book()
    thread = Blame("b", "a thread its code started crashed the worker (thread 0x7f00)")
    assert _death(book, {"a"}, 0.0, thread) == {"a": None}  # a computed; b's background thread killed it
    verdicts = _death(book, {"a"}, 1.0, thread)
    assert verdicts["a"] is None and verdicts["b"] is not None and verdicts["b"].quarantine
    assert "died 2 times" in verdicts["b"].why and "thread 0x7f00" in verdicts["b"].why
    assert book.failures.get("a") is None


def test_quarantine_evidence_outweighs_who_else_was_computing() -> None:
    book = _book()
    crash = Blame("b", "its code was on the crashing thread (senses/b/sense.py:3)")
    _death(book, {"a", "b"}, 0.0, crash)
    verdicts = _death(book, {"a", "b"}, 1.0, crash)
    assert verdicts["a"] is None and verdicts["b"] is not None and "senses/b/sense.py:3" in verdicts["b"].why
    assert book.failures.get("a") is None  # the neighbour's lost computes are not its failures


def test_deaths_nobody_explains_quarantine_the_group_when_they_keep_coming_unless_counted_elsewhere() -> None:
    book = _book()
    assert book.record_death("g", frozenset({"a", "b"}), None, 0.0, why="exited with signal SIGSEGV") == (None, None)
    assert book.record("a", Outcome.LOST, 0.0, group="g", blame=None) is None  # still nobody's failure
    blame, verdict = book.record_death("g", frozenset(), None, 1.0, why="exited with exit code 3")
    assert blame is None and verdict is not None and verdict.quarantine
    assert "worker group g's worker died 2 times" in verdict.why and "exit code 3" in verdict.why, verdict.why
    # a breach already counted, or a SIGKILL from outside (a person, the OOM killer): never a quarantine here
    counted = _book()
    for at in range(6):
        assert counted.record_death("g", frozenset({"a"}), None, float(at), counted=True) == (None, None)
