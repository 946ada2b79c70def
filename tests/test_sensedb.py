"""SenseDB: typed rows, raw SQL, signals, transaction guard, read-only peers."""

from __future__ import annotations

import sqlite3

import pytest

from nerve_cli.errors import SenseError
from nerve_cli.schema.declare import table
from nerve_cli.schema.migrate import apply_migrations
from nerve_cli.store.blobs import BlobStore
from nerve_cli.store.sensedb import Peers, SenseDB, open_peer, write_archive_map


@table(pk="ts", time="ts")
class Sample:
    ts: int
    value: float
    unit: str | None = None
    tags: list | None = None


@table(name="events", indexes=[("kind",)])
class Event:
    kind: str
    ok: bool = True


SQL = """
CREATE TABLE sample (ts INTEGER PRIMARY KEY, value REAL NOT NULL, unit TEXT, tags TEXT);
CREATE TABLE events (kind TEXT NOT NULL, ok INTEGER NOT NULL DEFAULT 1);
"""


@pytest.fixture
def db(tmp_path) -> SenseDB:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "0001_init.sql").write_text(SQL)
    handle = SenseDB.open(tmp_path / "data" / "s.db", name="s", blobs=BlobStore(tmp_path / "blobs"))
    apply_migrations(handle.conn, tmp_path / "m")
    yield handle
    handle.close()


def test_opened_in_wal_with_driver_autocommit(db) -> None:
    assert db.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
    assert db.conn.isolation_level is None and db.query("PRAGMA synchronous")[0]["synchronous"] == 1
    assert db.query("PRAGMA busy_timeout")[0]["timeout"] > 0


def test_typed_insert_and_rows(db) -> None:
    db.insert(Sample(ts=2, value=2.5, tags=["a", "b"]))
    assert db.insert_all([Sample(ts=1, value=1.0, unit="%"), Event(kind="boot")]) == 2
    rows = db.rows(Sample, order_by="ts")
    assert rows == [Sample(ts=1, value=1.0, unit="%"), Sample(ts=2, value=2.5, tags=["a", "b"])]
    assert db.rows(Sample, where="value > ?", params=(2,)) == [rows[1]]
    assert db.rows(Sample, order_by="ts desc", limit=1) == [rows[1]]
    assert db.rows(Event) == [Event(kind="boot", ok=True)]


def test_upsert_updates_by_primary_key(db) -> None:
    db.upsert(Sample(ts=1, value=1.0))
    db.upsert(Sample(ts=1, value=9.0, unit="ms"))
    assert db.rows(Sample) == [Sample(ts=1, value=9.0, unit="ms")]
    with pytest.raises(SenseError, match="needs a primary key"):
        db.upsert(Event(kind="x"))


def test_insert_of_a_non_table_says_so(db) -> None:
    with pytest.raises(SenseError, match="not a table"):
        db.insert({"ts": 1})


def test_query_execute_and_sqlite_utils(db) -> None:
    db.execute("INSERT INTO sample (ts, value) VALUES (?, ?)", (5, 5.0))
    assert db.query("SELECT ts, value FROM sample") == [{"ts": 5, "value": 5.0}]
    assert db.query("SELECT :x AS x", {"x": 3}) == [{"x": 3}]
    assert db.sqlite["sample"].count == 1
    assert set(db.sqlite.table_names()) >= {"sample", "events", "_signals", "_migrations"}


def test_sqlite_utils_writes_join_the_open_transaction(db) -> None:
    db.conn.execute("BEGIN IMMEDIATE")
    db.sqlite["sample"].insert({"ts": 7, "value": 7.0})
    db.conn.execute("ROLLBACK")
    assert db.query("SELECT count(*) n FROM sample") == [{"n": 0}]


@pytest.mark.parametrize("sql", ["COMMIT", "  rollback", "BEGIN", "END TRANSACTION"])
def test_transaction_control_refused(db, sql) -> None:
    with pytest.raises(SenseError, match="not allowed in a compute"):
        db.execute(sql)


def test_savepoints_are_allowed(db) -> None:
    db.conn.execute("BEGIN")
    db.execute("SAVEPOINT sp")
    db.execute("INSERT INTO sample (ts, value) VALUES (1, 1)")
    db.execute("ROLLBACK TO sp")
    db.execute("RELEASE sp")
    db.conn.execute("COMMIT")
    assert db.query("SELECT count(*) n FROM sample") == [{"n": 0}]


def test_signals_since_and_last_signal(db) -> None:
    assert db.last_signal() is None and db.signals_since(0) == []
    for ts, payload in [(10, b"1"), (20, b'{"a":2}'), (30, b"[3]")]:
        db.record_signal(ts, payload)
    assert db.last_signal() == {"id": 3, "ts": 30, "payload": [3]}
    assert [s["payload"] for s in db.signals_since(10)] == [{"a": 2}, [3]]
    assert [s["ts"] for s in db.signals_since(0, limit=2)] == [10, 20]


def test_blobs_attached(db) -> None:
    sha = db.blobs.put(b"x")
    assert db.blobs.get(sha) == b"x"
    bare = SenseDB(sqlite3.connect(":memory:"), name="bare")
    with pytest.raises(SenseError, match="no blob store"):
        _ = bare.blobs


def test_archive_map(db) -> None:
    write_archive_map(db.conn, [Sample.__nerve_table__, Event.__nerve_table__])
    assert db.query("SELECT * FROM _nerve_archive") == [{"table_name": "sample", "time_column": "ts"}]
    write_archive_map(db.conn, [])
    assert db.query("SELECT * FROM _nerve_archive") == []


def test_peer_is_read_only_and_sees_commits(db, tmp_path) -> None:
    peer = open_peer(tmp_path / "data" / "s.db")
    try:
        assert peer.readonly and peer.name == "s"
        db.insert(Sample(ts=1, value=1.0))
        assert peer.rows(Sample) == [Sample(ts=1, value=1.0)]  # WAL: readers see the writer's commits
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            peer.insert(Sample(ts=2, value=2.0))
        with pytest.raises(sqlite3.OperationalError):
            peer.execute("DELETE FROM sample")
        peer.execute("PRAGMA query_only=OFF")  # even then, the file is open read-only
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            peer.execute("DELETE FROM sample")
        assert db.query("SELECT count(*) n FROM sample") == [{"n": 1}]
    finally:
        peer.close()


def test_peer_uri_survives_odd_paths(tmp_path) -> None:
    odd = tmp_path / "we#ird ?dir%20" / "p.db"
    writer = SenseDB.open(odd, name="p")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("INSERT INTO t VALUES (1)")
    peer = open_peer(odd)
    assert peer.query("SELECT x FROM t") == [{"x": 1}]
    peer.close()
    writer.close()


def test_peers_mapping_enforces_the_list(tmp_path, db) -> None:
    peers = Peers("b", ["s", "later"], lambda n: tmp_path / "data" / f"{n}.db")
    assert list(peers) == ["s", "later"] and len(peers) == 2 and "s" in peers and "c" not in peers
    assert peers["s"].readonly
    with pytest.raises(SenseError, match=r"sense `b` reads peer `c`, which is not listed under senses\.b\.peers in nerve\.yaml"):
        peers["c"]
    with pytest.raises(SenseError, match="peer `later`, which has not run yet"):
        peers["later"]
    with pytest.raises(SenseError):
        peers.get("c")  # a typo'd peer name is a mistake, not a missing value
    peers.close()


def test_peer_query_can_be_interrupted(tmp_path, db) -> None:
    peers = Peers("b", ["s"], lambda n: tmp_path / "data" / f"{n}.db")
    peers.progress_handler = lambda: True
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        peers["s"].query("with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c")
    peers.close()
