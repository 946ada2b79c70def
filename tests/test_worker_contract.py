"""The compute transaction contract, through a real worker process and real SQLite files."""

from __future__ import annotations

import time

import pytest
from sensekit import db_rows, worker, write_instance

from nerve_cli.ops.senses.worker_client import WorkerGone
from nerve_cli.wire.protocol import Error, Signal, Silent

INSERT_THEN = """
import os, time
from .schema import Sample

def compute(db, peers):
    db.insert(Sample(ts=time.time_ns(), value=1.0))
    {tail}
"""


def _one(home, tail: str, **settings):
    write_instance(home, {"s": {"code": INSERT_THEN.format(tail=tail), **settings}})
    with worker(home) as w:
        return w.compute("s")


def test_value_commits_row_and_signal(home) -> None:
    answer = _one(home, "return {'load': 0.5}")
    assert isinstance(answer, Signal), answer
    assert answer.payload == {"load": 0.5} and answer.sense == "s" and answer.duration_ms >= 0
    assert db_rows(home, "s", "select count(*) from sample") == [(1,)]
    assert db_rows(home, "s", "select ts, payload from _signals") == [(answer.ts, '{"load":0.5}')]


def test_none_rolls_back_everything(home) -> None:
    answer = _one(home, "return None")
    assert isinstance(answer, Silent), answer
    assert db_rows(home, "s", "select count(*) from sample") == [(0,)]
    assert db_rows(home, "s", "select count(*) from _signals") == [(0,)]


def test_exception_rolls_back_and_names_the_line(home) -> None:
    answer = _one(home, "raise RuntimeError('sensor offline')")
    assert isinstance(answer, Error), answer
    assert answer.error.type == "RuntimeError" and answer.error.message == "sensor offline"
    assert answer.error.file == "senses/s/sense.py" and answer.error.line == 6
    assert "sensor offline" in answer.error.traceback and "sense_runtime" not in answer.error.traceback
    assert db_rows(home, "s", "select count(*) from sample") == [(0,)]


def test_non_json_payload_is_an_error_and_rolls_back(home) -> None:
    answer = _one(home, "return {1, 2}")
    assert isinstance(answer, Error), answer
    assert "set" in answer.error.message and "JSON" in answer.error.message
    assert answer.error.file == "senses/s/sense.py"
    assert db_rows(home, "s", "select count(*) from sample") == [(0,)]
    assert db_rows(home, "s", "select count(*) from _signals") == [(0,)]


def test_killed_worker_leaves_db_as_before_that_compute(home) -> None:
    code = """
    import os, time
    from .schema import Sample

    def compute(db, peers):
        db.insert(Sample(ts=time.time_ns(), value=float(len(db.query("select 1 from sample")))))
        if db.query("select count(*) n from sample")[0]["n"] > 1:
            os._exit(1)  # dies mid-transaction, after the insert
        return "ok"
    """
    write_instance(home, {"s": {"code": code}})
    w = worker(home)
    try:
        assert isinstance(w.compute("s"), Signal)
        with pytest.raises(WorkerGone):
            w.compute("s")
    finally:
        w.kill()
    assert db_rows(home, "s", "select count(*) from sample") == [(1,)]
    assert db_rows(home, "s", "select count(*) from _signals") == [(1,)]


def test_sense_result_passes_workflow_directive_through(home) -> None:
    code = """
    from nerve_cli.sdk import SenseResult

    def compute(db, peers):
        if db.query("select count(*) n from _signals")[0]["n"]:
            return SenseResult(None, workflow="cleanup|3|never")
        return SenseResult({"disk": 95}, workflow="cleanup|5|disk is 95% full | act now")
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        first = w.compute("s")
        second = w.compute("s")
    assert isinstance(first, Signal), first
    assert first.payload == {"disk": 95} and first.workflow == "cleanup|5|disk is 95% full | act now"
    assert isinstance(second, Silent), second
    assert db_rows(home, "s", "select payload from _signals") == [('{"disk":95}',)]


def test_async_compute_commits(home) -> None:
    code = """
    import asyncio, time
    from .schema import Sample

    async def compute(db, peers):
        await asyncio.sleep(0.01)
        db.insert(Sample(ts=time.time_ns(), value=2.0))
        return 2.0
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        answer = w.compute("s")
    assert isinstance(answer, Signal) and answer.payload == 2.0, answer
    assert db_rows(home, "s", "select value from sample") == [(2.0,)]


def test_compute_arity_db_only_and_no_args(home) -> None:
    write_instance(home, {
        "one": {"code": "def compute(db):\n    return db.name\n"},
        "zero": {"code": "def compute():\n    return 0\n"},
    })
    with worker(home) as w:
        assert w.compute("one").payload == "one"
        assert w.compute("zero").payload == 0


def test_transaction_control_from_sense_code_is_refused(home) -> None:
    answer = _one(home, "db.execute('COMMIT')\n    return 1")
    assert isinstance(answer, Error) and "COMMIT is not allowed" in answer.error.message
    assert db_rows(home, "s", "select count(*) from sample") == [(0,)]


def test_blobs_reachable_from_sense_code(home) -> None:
    answer = _one(home, "return db.blobs.put(b'big thing')")
    assert isinstance(answer, Signal)
    sha = answer.payload
    assert (home / "data" / "blobs" / sha[:2] / sha[2:]).read_bytes() == b"big thing"


def test_archive_map_written_from_time_markers(home) -> None:
    _one(home, "return 1")
    assert db_rows(home, "s", "select table_name, time_column from _nerve_archive") == [("sample", "ts")]


@pytest.mark.parametrize("tail, kind", [("return 1", Signal), ("return None", Silent),
                                        ("raise RuntimeError('x')", Error)])
def test_an_answer_says_when_its_transaction_ended(home, tail: str, kind: type) -> None:
    """The kernel counts the sense's interval from there, not from when it read the answer."""
    write_instance(home, {"s": {"code": INSERT_THEN.format(tail=tail)}})
    with worker(home) as w:
        before = time.time()
        answer = w.compute("s")
        after = time.time()
    assert isinstance(answer, kind), answer
    assert before <= answer.ended <= after
    if isinstance(answer, Signal):
        assert answer.ts <= answer.ended * 1000 + 1  # its signal row was written before it committed
