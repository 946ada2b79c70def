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
    blame = book.record_death("g", frozenset(computing), evidence, at)
    return {sense: book.record(sense, Outcome.LOST, at, group="g", blame=blame) for sense in sorted(computing)}


def test_quarantine_blames_nobody_when_two_senses_were_computing_at_every_death() -> None:
    book = _book()
    for at in (0.0, 1.0, 2.0):
        verdicts = _death(book, {"a", "b"}, at)
    assert verdicts == {"a": None, "b": None}


def test_quarantine_blames_the_only_sense_computing_and_spares_the_one_there_once() -> None:
    book = _book()
    assert _death(book, {"a", "b"}, 0.0) == {"a": None, "b": None}  # ambiguous: nobody yet
    verdicts = _death(book, {"a"}, 1.0)  # only a: a is the likely cause, the earlier death counts for it too
    assert verdicts["a"] is not None and verdicts["a"].quarantine
    assert "it was the only sense computing" in verdicts["a"].why and "died 2 times" in verdicts["a"].why
    assert _death(book, {"b"}, 2.0)["b"] is None  # b's first death of its own


def test_quarantine_blames_the_one_sense_common_to_every_death() -> None:
    book = _book()
    _death(book, {"a", "b"}, 0.0)
    verdicts = _death(book, {"a", "c"}, 1.0)
    assert verdicts["c"] is None and verdicts["a"] is not None and verdicts["a"].quarantine
    assert "computing at each of its worker's last 2 deaths" in verdicts["a"].why


def test_quarantine_evidence_outweighs_who_else_was_computing() -> None:
    book = _book()
    crash = Blame("b", "its code was on the crashing thread (senses/b/sense.py:3)")
    _death(book, {"a", "b"}, 0.0, crash)
    verdicts = _death(book, {"a", "b"}, 1.0, crash)
    assert verdicts["a"] is None and verdicts["b"] is not None and "senses/b/sense.py:3" in verdicts["b"].why
    assert book.failures.get("a") is None  # the neighbour's lost computes are not its failures
