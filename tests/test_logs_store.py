"""LogStore: ordered buffered writes, workflow_runs in the same transaction, run ids, flush failure."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from nerve_cli.store.logs import LogStore, query_logs, workflow_runs
from nerve_cli.vocab import logrows
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import Reason


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "logs.db"


def test_schema_is_the_rfc_schema_with_wal(db: Path) -> None:
    LogStore(db).close()
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
    assert {"logs", "workflow_runs", "meta"} <= tables
    assert indexes == {"idx_logs_source_type", "idx_logs_ts", "idx_logs_ref_id", "idx_workflow_runs_status"}
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_order_preserved_across_batches(db: Path) -> None:
    store = LogStore(db)
    expected = []
    for batch in range(5):
        for i in range(20):
            # timestamps run backwards: order must follow calls, not ts
            n = batch * 20 + i
            if i % 7 == 0:
                store.workflow_event(f"run-{n}", "wf", "message", {"n": n}, ts=10_000 - n)
            else:
                store.append("system", "tick", None, {"n": n}, ts=10_000 - n)
            expected.append(n)
        assert store.flush() == 20
    store.close()
    rows = query_logs(db)
    assert [r["payload"]["n"] for r in rows] == expected
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    assert rows[0]["time"].endswith("Z") and rows[0]["ts"] == 10_000


def test_held_rows_are_written_after_the_rows_written_in_between_and_other_threads_are_not_held(db: Path) -> None:
    """The loop hands a listener its start before it logs the finished compute: the start's rows are held and
    replayed after, so the log reads run_complete before run_start (and ts follows id)."""
    store = LogStore(db)
    held = store.hold()
    assert held is not None and store.hold() is None  # one hold at a time; a nested one adds to it
    store.write(logrows.run_start("b", 2, Reason.signal("a")), ts=None)
    other = threading.Thread(target=lambda: store.write(logrows.warning("x", "from another thread")))
    other.start()
    other.join()
    store.unhold(held)
    store.write(logrows.run_complete("a", 1, Outcome.SIGNAL, Reason.signal("go")))
    store.replay(held)
    store.flush()
    store.close()
    rows = query_logs(db)
    assert [(r["type"], r["ref_id"]) for r in rows] == [("warning", "x"), ("run_complete", "a"), ("run_start", "b")]
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)


def test_buffered_until_flush_and_pending(db: Path) -> None:
    store = LogStore(db)
    store.append("system", "engine_started")
    store.set_meta("k", "v")
    assert store.pending() == 2
    assert query_logs(db) == []
    assert store.flush() == 1
    assert store.pending() == 0
    assert [r["type"] for r in query_logs(db)] == ["engine_started"]
    assert store.get_meta("k") == "v"
    store.close()


def test_workflow_event_upserts_runs_in_same_transaction(db: Path) -> None:
    store = LogStore(db)
    run = store.allocate_run_id()
    store.workflow_event(run, "review", "queued", {"prompt": "x"})
    store.flush()
    assert workflow_runs(db)[0]["status"] == "queued"

    store.workflow_event(run, "review", "message", {"seq": 1})  # not a status: no upsert
    store.workflow_event(run, "review", "started")
    # make the upsert fail inside the flush: the log rows of the batch must not land either
    side = sqlite3.connect(db)
    side.execute(
        "CREATE TRIGGER no_upsert BEFORE UPDATE ON workflow_runs BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    side.commit()
    with pytest.raises(sqlite3.DatabaseError, match="boom"):
        store.flush()
    assert [r["type"] for r in query_logs(db)] == ["queued"]
    assert workflow_runs(db)[0]["status"] == "queued"

    side.execute("DROP TRIGGER no_upsert")
    side.commit()
    assert store.flush() == 2
    assert [r["type"] for r in query_logs(db)] == ["queued", "message", "started"]
    assert workflow_runs(db) == [
        {"run_id": run, "workflow": "review", "status": "started", "ts": workflow_runs(db)[0]["ts"],
         "time": workflow_runs(db)[0]["time"]}
    ]
    assert workflow_runs(db, status="completed") == []
    store.close()


def test_run_ids_sequential_across_reopen(db: Path) -> None:
    store = LogStore(db)
    ids = [store.allocate_run_id() for _ in range(3)]
    for r in ids:
        store.workflow_event(r, "wf", "queued")
    store.close()
    store = LogStore(db)
    assert ids == ["run-1", "run-2", "run-3"]
    assert store.allocate_run_id() == "run-4"
    store.close()
    assert LogStore(db).get_meta("run_counter") == "4"


def test_flush_failure_keeps_buffer_in_order(db: Path) -> None:
    store = LogStore(db)
    store.append("system", "a")
    store.flush()
    # another process holds the write lock (e.g. an archiver mid-transaction)
    store._conn.execute("PRAGMA busy_timeout = 50")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    store.append("system", "b")
    store.append("system", "c")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store.flush()
    assert store.pending() == 2
    store.append("system", "d")
    blocker.execute("ROLLBACK")
    assert store.flush() == 3
    assert [r["type"] for r in query_logs(db)] == ["a", "b", "c", "d"]
    store.close()


def test_last_completions_come_from_meta_and_memory_never_from_a_scan_of_the_logs(db: Path) -> None:
    store = LogStore(db)
    store.append("reflex", "run_complete", "cpu", {"outcome": "signal"}, ts=1000)
    store.append("reflex", "run_complete", "cpu", {"outcome": "silent"}, ts=3000)
    store.append("reflex", "run_start", "disk", ts=5000)
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    # what a hot reload asks: known at once, unflushed rows included, without touching the database
    assert store.last_completions() == {"cpu": 3000}
    assert statements == []
    store.close()
    store = LogStore(db)
    store._conn.set_trace_callback(statements.append)
    assert store.get_meta("last_complete:cpu") == "3000"
    assert store.last_completions() == {"cpu": 3000}
    assert not any("GROUP BY" in sql for sql in statements)
    store.close()


def test_a_log_from_before_the_anchors_is_scanned_once_and_then_never_again(db: Path) -> None:
    store = LogStore(db)
    store.append("reflex", "run_complete", "cpu", {"outcome": "signal"}, ts=3000)
    store.close()
    # a logs.db written before the meta anchors: run_complete rows, no anchor for them
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'completion_anchors'")
        conn.execute("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES ('reflex', 'run_complete', 'disk', NULL, 4000)")
        conn.execute("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES ('reflex', 'run_complete', 'cpu', NULL, 2000)")
    conn.close()
    store = LogStore(db)
    assert not store.anchored
    assert store.last_completions() == {"cpu": 3000, "disk": 4000}  # the newer of anchor and row
    assert store.anchored
    store.close()
    conn = sqlite3.connect(db)
    assert dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'last_complete:%' OR key = 'completion_anchors'")) == {
        "last_complete:cpu": "3000", "last_complete:disk": "4000", "completion_anchors": "1"}
    conn.close()
    store = LogStore(db)
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    assert store.anchored
    assert store.last_completions() == {"cpu": 3000, "disk": 4000}
    assert not any("GROUP BY" in sql for sql in statements)
    store.close()


def test_completion_anchors_are_written_once_per_sense_per_flush_with_the_newest_time(db: Path) -> None:
    store = LogStore(db)
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    for ts in (1000, 3000, 2000):
        store.append("reflex", "run_complete", "cpu", {"outcome": "signal"}, ts=ts)
    store.append("reflex", "run_complete", "disk", {"outcome": "signal"}, ts=500)
    assert store.flush() == 4
    assert sum(1 for sql in statements if "INTO meta" in sql) == 2  # not one per row
    assert store.get_meta("last_complete:cpu") == "3000" and store.get_meta("last_complete:disk") == "500"
    store.close()


def test_query_filters_limit_and_after_id(db: Path) -> None:
    store = LogStore(db)
    for i in range(10):
        store.append("reflex" if i % 2 else "system", "t", f"s{i % 3}", {"i": i}, ts=1000 + i)
    store.close()
    assert len(query_logs(db, source="reflex")) == 5
    assert [r["payload"]["i"] for r in query_logs(db, limit=3)] == [7, 8, 9]
    assert [r["payload"]["i"] for r in query_logs(db, since_ms=1008)] == [8, 9]
    assert [r["payload"]["i"] for r in query_logs(db, after_id=8)] == [8, 9]
    assert [r["payload"]["i"] for r in query_logs(db, ref="s0", type="t")] == [0, 3, 6, 9]
    assert query_logs(db.parent / "missing.db") == []


def test_no_row_is_larger_than_the_largest_payload_whatever_it_was_made_from(db: Path) -> None:
    """A row built from text Nerve did not bound (a config's problems quoting a hostile file wrote one
    config_rejected row of 204 MB) is cut to MAX_ROW, stays valid JSON and says how large it was."""
    import json

    from nerve_cli.store.logs import MAX_ROW
    from nerve_cli.vocab import logrows

    store = LogStore(db)
    store.write(logrows.config_rejected(["x" * (3 * MAX_ROW)] + ["problem"] * (MAX_ROW // 4), []))
    store.write(logrows.config_rejected(["kept whole"], []))
    store.flush()
    store.close()
    rows = sqlite3.connect(db).execute("SELECT payload FROM logs ORDER BY id").fetchall()
    big, small = (json.loads(p) for (p,) in rows)
    assert len(rows[0][0]) <= MAX_ROW
    assert big["truncated_from_bytes"] > 3 * MAX_ROW
    assert big["problems"][0].startswith("xxx") and "more characters" in big["problems"][0]
    assert "more items" in big["problems"][-1]
    assert small == {"problems": ["kept whole"], "warnings": []}
