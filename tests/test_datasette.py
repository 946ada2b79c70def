"""Datasette on a live instance (readable views, hidden engine tables, canned queries) and `nerve backup`."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from archive_data import add_thread
from enginekit import RunningEngine, nerve, wait_for, write_instance

from nerve_cli.home import Layout
from nerve_cli.schema.diff import generate_migration
from nerve_cli.store.logs import now_ms

CONFIG = """
senses:
  counter: {}
  boom: {}
reflexes:
  - {sense: counter, interval: 100ms}
  - {sense: boom, interval: 1h}
"""
COUNTER = """
import time
from .schema import Reading

def compute(db, peers):
    n = len(db.rows(Reading)) + 1
    db.insert(Reading(ts=time.time_ns() // 1_000_000, count=n))
    return n
"""
SCHEMA = """
from nerve_cli.sdk import table

@table(pk="ts", time="ts")
class Reading:
    ts: int
    count: int
"""
BOOM = "def compute(db, peers):\n    raise ValueError('the sensor is unplugged')\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return json.loads(answer.read())


def reachable(port: int) -> bool:
    try:
        get(port, "/-/versions.json")
        return True
    except OSError:
        return False


@pytest.fixture
def instance(tmp_path: Path) -> Path:
    home = write_instance(tmp_path / "inst", CONFIG, {"counter": COUNTER, "boom": BOOM}, {"counter": SCHEMA})
    assert generate_migration(home / "senses" / "counter") is not None
    generate_migration(home / "senses" / "boom")
    return home


def count(path: Path, table: str, uri_args: str = "mode=ro") -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?{uri_args}", uri=True)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_datasette_shows_views_hides_engine_tables_and_runs_canned_queries(instance: Path, tmp_path: Path) -> None:
    port = free_port()
    add_thread(Layout(instance), "run-1", "completed", [now_ms() - 2000, now_ms() - 1000])
    with RunningEngine(instance) as engine:
        engine.wait_ready(groups=1)
        db = instance / "data" / "senses" / "counter.db"
        wait_for(lambda: db.exists() and count(db, "_signals") >= 5, 20, what="five counter signals")
        server = subprocess.Popen([sys.executable, "-m", "nerve_cli", "datasette", "--port", str(port),
                                   "--home", str(instance)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: server.poll() is not None or reachable(port), 30, 0.2, what="datasette to listen")
            assert server.poll() is None, server.stdout.read().decode()

            signals = get(port, "/counter/signals_view.json?_shape=array&_sort_desc=id")
            assert len(signals) >= 5 and signals[0]["time"].endswith("Z") and "T" in signals[0]["time"]
            assert signals[0]["time"][:10] == _utc_day(signals[0]["ts"])
            readings = get(port, "/counter/reading_view.json?_shape=array")
            assert readings and {"time", "ts", "count"} <= set(readings[0])
            health = get(port, "/nerve-health/signals_view.json?_shape=array")
            assert health and health[0]["time"].endswith("Z")  # the engine's own sense database too
            logs = get(port, "/logs/logs_view.json?_shape=array&_size=5")
            assert len(logs) == 5 and {"time", "source", "type", "payload", "ts"} <= set(logs[0])

            tables = {t["name"]: t for t in get(port, "/counter.json")["tables"]}
            for engine_table in ("_signals", "_migrations", "_nerve_archive", "_nerve_identity", "_nerve_cursors",
                                 "sqlite_sequence"):
                assert tables[engine_table]["hidden"], engine_table
            assert not tables["reading"]["hidden"]
            # Datasette 0.65 showed _nerve_identity in every database and nerve-threads' _nerve_feed: no `_` table
            # of any database is shown
            for database in get(port, "/.json").values():
                shown = [t["name"] for t in get(port, f"/{database['name']}.json")["tables"]
                         if t["name"].startswith("_") and not t["hidden"]]
                assert shown == [], (database["name"], shown)
            assert {t["name"]: t["hidden"] for t in get(port, "/logs.json")["tables"]}["meta"] is True

            wait_for(lambda: count(instance / "data" / "logs.db", "logs WHERE type = 'error'"), 20, what="boom's error")
            errors = get(port, "/logs/recent_errors.json?_shape=array")
            assert errors[0]["sense"] == "boom" and errors[0]["message"] == "the sensor is unplugged"
            assert errors[0]["location"] == "senses/boom/sense.py:2" and errors[0]["time"].endswith("Z")
            slowest = {r["sense"]: r for r in get(port, "/logs/slowest_senses.json?_shape=array")}
            assert slowest["counter"]["computes"] >= 5 and slowest["boom"]["failures"] >= 1
            threads = get(port, "/logs/threads_by_status.json?_shape=array")
            assert [(t["workflow"], t["status"], t["threads"]) for t in threads] == [("review", "completed", 1)]
            # the reader stays attached while the engine stops: the last commits may stay in logs.db-wal
            code, output = engine.stop()
            assert code == 0, output
            backup = nerve("backup", str(tmp_path / "copy"), "--json", home=instance)
        finally:
            server.terminate()
            server.wait(10)
    assert backup.returncode == 0, backup.stderr
    report = json.loads(backup.stdout)
    assert {d["path"] for d in report["databases"]} == {"data/logs.db", "data/senses/counter.db",
                                                       "data/senses/boom.db", "data/senses/nerve-health.db",
                                                       "data/senses/nerve-threads.db"}
    copy = tmp_path / "copy"
    assert not list(copy.rglob("*-wal")) and not (copy / "data" / "nerve.sock").exists()
    assert (copy / "nerve.yaml").read_text() == (instance / "nerve.yaml").read_text()
    assert (copy / "senses" / "counter" / "migrations").is_dir()
    for rel, table in (("data/logs.db", "logs"), ("data/logs.db", "workflow_runs"),
                       ("data/senses/counter.db", "_signals"), ("data/senses/counter.db", "reading")):
        expected = count(instance / rel, table)
        assert expected and count(copy / rel, table, "immutable=1") == expected, (rel, table)


def test_backup_refuses_a_used_destination_and_datasette_needs_data(instance: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    refused = nerve("backup", str(tmp_path / "taken"), home=instance)
    assert refused.returncode == 1 and "not an empty folder" in refused.stderr
    assert (tmp_path / "taken" / "x").read_text() == "mine"
    inside = nerve("backup", str(instance / "data" / "b"), home=instance)
    assert inside.returncode == 1 and "inside the instance" in inside.stderr
    (tmp_path / "a-file").write_text("not a folder")
    nowhere = nerve("backup", str(tmp_path / "a-file" / "copy"), home=instance)
    assert nowhere.returncode == 1 and "Traceback" not in nowhere.stderr, nowhere.stderr
    assert f"cannot back up to {tmp_path / 'a-file' / 'copy'}: its folder cannot be made" in nowhere.stderr
    empty = nerve("datasette", home=instance)
    assert empty.returncode == 1 and "has no databases yet" in empty.stderr


def _utc_day(ts_ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def test_backup_of_data_is_as_private_as_data(instance: Path, tmp_path: Path) -> None:
    import os
    import stat

    with RunningEngine(instance) as engine:
        engine.wait_ready()
        wait_for(lambda: (instance / "data" / "senses" / "counter.db").exists(), 10, what="the counter's db")
        engine.stop()
    blobs = instance / "data" / "blobs" / "ab"
    blobs.mkdir(parents=True, exist_ok=True)
    (blobs / "abcd").write_bytes(b"blob")
    os.chmod(blobs / "abcd", 0o400)
    (instance / "data" / "archive" / "logs").mkdir(parents=True, exist_ok=True)
    (instance / "data" / "archive" / "logs" / "2026-01-01.jsonl").write_text("{}\n")
    os.chmod(instance / "data" / "archive" / "logs" / "2026-01-01.jsonl", 0o644)  # an older instance's file
    old = os.umask(0o022)
    try:
        made = nerve("backup", str(tmp_path / "copy"), home=instance)
    finally:
        os.umask(old)
    assert made.returncode == 0, made.stderr
    copy = tmp_path / "copy"

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    inside = [copy / "data", *(copy / "data").rglob("*")]
    assert {p.relative_to(copy).as_posix(): mode(p) for p in inside if p.is_dir() and mode(p) != 0o700} == {}
    files = {p.relative_to(copy).as_posix(): mode(p) for p in inside if p.is_file()}
    assert files["data/logs.db"] == files["data/senses/counter.db"] == 0o600
    assert files["data/archive/logs/2026-01-01.jsonl"] == 0o600 and files["data/blobs/ab/abcd"] == 0o400
    assert all(m in (0o600, 0o400) for m in files.values()), files
    assert mode(copy / "nerve.yaml") == mode(instance / "nerve.yaml")  # outside data/: as it was


def test_datasette_shows_events_once_there_are_any(instance: Path) -> None:
    from nerve_cli.instance.datasette import databases, metadata
    from nerve_cli.store.events import store_event

    layout = Layout(instance)
    assert layout.events_db not in databases(layout)  # no emit yet: no events.db
    store_event(layout.events_db, "task.created", {"id": 7})
    assert layout.events_db in databases(layout)
    tables = metadata(layout)["databases"]["events"]["tables"]
    assert not tables["events_view"].get("hidden") and tables["_nerve_archive"]["hidden"]


def test_a_sense_named_like_an_engine_database_gets_its_own_metadata(tmp_path: Path) -> None:
    """Datasette names databases by file stem, `logs_2` for the second `logs.db`: the metadata follows its rule."""
    from datasette.app import Datasette

    from nerve_cli.instance.datasette import QUERIES, SENSE_TABLES, command
    from nerve_cli.store.events import store_event

    home = tmp_path / "inst"
    (home / "data" / "senses").mkdir(parents=True)
    (home / "nerve.yaml").write_text("senses: {}\n")
    layout = Layout(home)
    sqlite3.connect(layout.logs_db).execute("CREATE TABLE logs (id INTEGER PRIMARY KEY)").connection.close()
    store_event(layout.events_db, "task.created", {"id": 7})
    for sense in ("events", "logs", "logs_2"):
        sqlite3.connect(layout.sense_db(sense)).execute("CREATE TABLE _signals (id INTEGER)").connection.close()
    argv = command(layout, "127.0.0.1", 8001, [])
    files = argv[argv.index("serve") + 1:argv.index("--metadata")]
    served = [name for name in Datasette(files=files).databases if not name.startswith("_")]
    meta = json.loads(Path(argv[argv.index("--metadata") + 1]).read_text())["databases"]
    assert list(meta) == served == ["logs", "events", "events_2", "logs_2", "logs_2_2"]
    assert meta["logs"]["queries"] == QUERIES and "Sense" not in meta["logs"]["description"]
    assert meta["events"]["tables"]["events_view"] and meta["events_2"]["tables"] == SENSE_TABLES
    assert meta["logs_2"]["description"] == "Sense logs: its own tables and its signals"
    assert meta["logs_2_2"]["description"] == "Sense logs_2: its own tables and its signals"


def test_backup_counts_in_the_singular(tmp_path: Path) -> None:
    home = write_instance(tmp_path / "inst", "senses: {}\n", {})
    (home / "data").mkdir()
    sqlite3.connect(home / "data" / "logs.db").execute("CREATE TABLE logs (id INTEGER PRIMARY KEY)").connection.close()
    made = nerve("backup", str(tmp_path / "copy"), home=home)
    assert made.returncode == 0, made.stderr
    assert f"Backed up to {tmp_path / 'copy'}: 1 database and 1 other file, " in made.stdout, made.stdout


DATASETTE_1 = Path(__file__).resolve().parents[1] / ".venv-datasette1" / "bin" / "datasette"


@pytest.mark.parametrize("version", ["0.65", "1.0"])
def test_canned_queries_hidden_tables_and_the_users_metadata_merged_under_both_versions(
        tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Datasette 1.0 reads queries and table settings from -c, 0.65 from metadata: Nerve writes each its way,
    and a user's --metadata is merged into Nerve's rather than replacing it."""
    if version == "1.0":
        assert DATASETTE_1.exists(), "make tools installs Datasette 1.0 (a pre-release) in .venv-datasette1"
        monkeypatch.setenv("NERVE_DATASETTE", str(DATASETTE_1))
    home = write_instance(tmp_path / "inst", "senses: {}\n", {})
    from nerve_cli.store.logs import LogStore
    from nerve_cli.vocab import logrows

    store = LogStore(Layout(home).logs_db)
    store.write(logrows.error("boom", "the sensor is unplugged", sense="boom", file="senses/boom/sense.py", line=2))
    store.close()
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"title": "My lab", "databases": {"logs": {"description": "mine"}}}))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "nerve_cli", "datasette", "--port", str(port), "--home", str(home),
                               "--", "--metadata", str(mine)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: server.poll() is not None or reachable(port), 60, 0.2, what="datasette to listen")
        assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
        assert get(port, "/-/versions.json")["datasette"]["version"].startswith(version.split(".")[0])
        errors = get(port, "/logs/recent_errors.json?_shape=array")  # a canned query: Nerve's config was read
        assert errors[0]["sense"] == "boom" and errors[0]["message"] == "the sensor is unplugged"
        hidden = {t["name"]: t["hidden"] for t in get(port, "/logs.json")["tables"]}
        assert hidden["meta"] is True and hidden["logs"] is False
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert "My lab" in page.read().decode()  # the user's title, merged in
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/logs", timeout=10) as page:
            assert "mine" in page.read().decode()  # theirs wins where both set a key
        written = json.loads((home / "data" / "datasette-metadata.json").read_text())
        assert written["databases"]["logs"]["description"] == "mine"
        assert written["databases"]["logs"]["tables"]["logs"]["columns"]["ts"].startswith("when it happened")
    finally:
        server.terminate()
        server.wait(10)
