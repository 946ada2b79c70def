"""Peers through a real worker: read-only at the SQLite level, limited to the `peers:` list."""

from __future__ import annotations

from sensekit import db_rows, worker, write_instance

from nerve_cli.wire.protocol import Error, Signal

WRITER = """
import time
from .schema import Sample

def compute(db, peers):
    db.insert(Sample(ts=time.time_ns(), value=42.0))
    return 42.0
"""


def _instance(home, reader_code: str, peers=("a",)) -> None:
    write_instance(home, {
        "a": {"group": "g", "code": WRITER},
        "b": {"group": "g", "peers": list(peers), "code": reader_code, "schema": None, "migration": None},
    })


def test_peer_read_sees_committed_rows_and_signals(home) -> None:
    _instance(home, """
    def compute(db, peers):
        a = peers["a"]
        return {"value": a.query("select value from sample")[0]["value"], "signals": len(a.signals_since(0))}
    """)
    with worker(home, "g") as w:
        assert isinstance(w.compute("a"), Signal)
        answer = w.compute("b")
    assert isinstance(answer, Signal) and answer.payload == {"value": 42.0, "signals": 1}, answer


def test_peer_write_is_refused_and_leaves_the_peer_untouched(home) -> None:
    _instance(home, """
    def compute(db, peers):
        peers["a"].execute("DELETE FROM sample")
        return "deleted"
    """)
    with worker(home, "g") as w:
        w.compute("a")
        answer = w.compute("b")
    assert isinstance(answer, Error), answer
    assert "readonly" in answer.error.message and answer.error.file == "senses/b/sense.py" and answer.error.line == 2
    assert db_rows(home, "a", "select count(*) from sample") == [(1,)]


def test_unlisted_peer_is_refused_naming_the_key(home) -> None:
    _instance(home, """
    def compute(db, peers):
        return peers["a"].query("select 1 as one")[0]["one"]
    """, peers=())
    with worker(home, "g") as w:
        w.compute("a")
        answer = w.compute("b")
    assert isinstance(answer, Error), answer
    assert "not listed under senses.b.peers in nerve.yaml" in answer.error.message and "`a`" in answer.error.message


def test_peer_that_has_not_run_yet(home) -> None:
    _instance(home, """
    def compute(db, peers):
        return peers["a"].query("select 1 as one")[0]["one"]
    """)
    (home / "senses" / "a" / "sense.py").write_text("def compute(db, peers):\n    return 1\n")
    with worker(home, "g", senses=["b"]) as w:  # a's db is never created in this worker
        answer = w.compute("b")
    assert isinstance(answer, Error) and "has not run yet" in answer.error.message
