"""Exactly once across a rebuilt database: a listener's cursor remembers which source database it counted in.

Every source database (a sense's, events.db, nerve-health's) gets an identity
when it is made; a listener keeps it beside its cursor. When the source was
deleted and built again (its ids start at 1 again), the listener's next compute
sees another identity: it reads the new database from its first event, and the
log says so (`cursor_restarted`). A listener's own database truncated to 0
bytes is never started over silently: it fails to load, saying which file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from enginekit import RunningEngine, completes, errors, nerve, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, got, store_sense

from nerve_cli.schema.migrate import generate_migration

CONFIG = """
    senses:
      src: {}
      store: {enabled: ENABLED}
    reflexes:
      - {sense: src, interval: 30ms}
      - {sense: store, on: [src]}
"""
SRC = "def compute(db, peers):\n    return len(db.query('SELECT id FROM _signals')) + 1\n"


def signal_ids(home: Path, sense: str) -> list[int]:
    path = home / "data" / "senses" / f"{sense}.db"
    try:  # read-only: a plain connect would create an empty file where the engine is to build one
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return [r[0] for r in conn.execute("SELECT id FROM _signals ORDER BY id")]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def instance(home: Path, enabled: bool) -> None:
    write_instance(home, CONFIG.replace("ENABLED", "true" if enabled else "false"), {"src": SRC})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    if not (home / "senses" / "store" / "migrations" / "0001_init.sql").exists():
        generate_migration(home / "senses" / "store")


def test_a_source_rebuilt_while_its_listener_was_disabled_is_read_again_from_its_first_event(home: Path) -> None:
    instance(home, enabled=True)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) >= 12, 30, what="the listener to consume a dozen signals")
        engine.stop()
    cursor_before = max(event_id for _, event_id, _ in got(home, "store"))
    for suffix in ("", "-wal", "-shm"):  # the source's database is deleted: it is rebuilt, ids from 1
        (home / "data" / "senses" / f"src.db{suffix}").unlink(missing_ok=True)
    instance(home, enabled=False)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(signal_ids(home, "src")) >= 5, 30, what="the rebuilt source to signal")
        engine.stop()
    rebuilt = signal_ids(home, "src")
    assert rebuilt[0] == 1 and len(rebuilt) < cursor_before  # without identities, ids below the cursor are lost
    received = len(got(home, "store"))
    instance(home, enabled=True)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: read_logs(home, "system", "cursor_restarted", "store"), 30, what="the restart to be logged")
        wait_for(lambda: {i for _, i, _ in got(home, "store")[received:]} >= set(rebuilt), 30,
                 what="every event of the rebuilt source")
        engine.stop()
    again = [i for _, i, _ in got(home, "store")[received:]]
    assert again[: len(rebuilt)] == rebuilt  # from its first event, each once, in order
    row = read_logs(home, "system", "cursor_restarted", "store")[0]["payload"]
    assert row["source"] == "src" and row["was_at"] == cursor_before and row["identity_was"] != row["identity_now"]


def test_a_listener_database_truncated_to_0_bytes_is_refused_not_started_over(home: Path) -> None:
    instance(home, enabled=True)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) >= 3, 30, what="the listener to consume")
        engine.stop()
    path = home / "data" / "senses" / "store.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: any("0 bytes" in e["payload"]["message"] for e in errors(home, "store")), 30,
                 what="store's load failure")
        wait_for(lambda: len(completes(home, "src")) >= 3, 30, what="the source to keep running")
        engine.stop()
    assert path.stat().st_size == 0  # not silently started over: every event would have been delivered again
    shown = nerve("sense", "compute", "store", home=home)
    assert shown.returncode == 1 and "0 bytes" in shown.stdout + shown.stderr


TICK = """
import os

def compute(db, peers):
    marker = os.path.join(os.path.dirname(db.path), "..", "delete-me-once")
    if os.path.exists(marker):  # deleted mid-compute: as a person running `rm` at that moment would
        os.remove(marker)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(str(db.path) + suffix)
            except FileNotFoundError:
                pass
        return "lost with the file"
    return len(db.query("SELECT id FROM _signals")) + 1
"""


def test_a_sense_database_deleted_while_the_engine_runs_is_rebuilt_and_no_signal_is_lost_silently(home: Path) -> None:
    write_instance(home, CONFIG.replace("ENABLED", "true").replace("30ms", "100ms"), {"src": TICK})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) >= 3, 30, what="the listener to consume")
        for suffix in ("", "-wal", "-shm"):  # deleted between computes, as docs/guides/senses.md allows
            (home / "data" / "senses" / f"src.db{suffix}").unlink(missing_ok=True)
        wait_for(lambda: read_logs(home, "system", "sense_db_created", "src"), 30, what="the rebuild to be logged")
        (home / "data" / "delete-me-once").write_text("")  # and once while a compute runs
        wait_for(lambda: any(e["payload"].get("error_type") == "DatabaseDeleted" for e in errors(home, "src")), 30,
                 what="the compute whose file was deleted under it to fail")
        wait_for(lambda: len(signal_ids(home, "src")) >= 3, 30, what="src to signal into its new database")
        engine.stop()
    heard = [p for _, _, p in got(home, "store")]
    assert "lost with the file" not in heard  # never routed: its signal row went with the deleted file
    shown = nerve("sense", "show", "src", "--json", home=home)
    assert shown.returncode == 0 and '"signal_count": 0' not in shown.stdout  # it ran, and says so


def test_a_wal_deleted_under_a_running_worker_is_noticed_and_what_follows_is_seen(home: Path) -> None:
    """With a -wal deleted (NAME.db, NAME.db-wal, NAME.db-shm deleted one after the other, the worker having
    built the database again in between), the worker went on committing into the unlinked file: no reader
    ever saw its signals again. It notices, opens the database again, and what it signals next is seen."""
    write_instance(home, CONFIG.replace("ENABLED", "false").replace("30ms", "100ms"), {"src": SRC})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(signal_ids(home, "src")) >= 3, 30, what="src to signal")
        seen = len(signal_ids(home, "src"))
        for suffix in ("-wal", "-shm"):  # the side files the worker has open, as a clean-up of them would
            (home / "data" / "senses" / f"src.db{suffix}").unlink()
        # until the worker opens the database again, a reader meets "disk I/O error" (signal_ids: []): it does at
        # its next compute (it used to go on until SQLite's own checkpoint, hundreds of computes later)
        wait_for(lambda: len(signal_ids(home, "src")) >= seen + 3, 5, what="signals after the -wal was deleted")
        engine.stop()


def test_a_source_put_back_from_a_backup_behind_its_listeners_cursor_is_read_from_where_the_listener_was(
        home: Path, tmp_path: Path) -> None:
    """`nerve backup`'s copy of a source database has the same identity: put back, its ids go on from the copy's
    newest, behind the listener's cursor, and the listener skipped every signal up to where its cursor was."""
    instance(home, enabled=True)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) >= 4, 30, what="the listener to consume")
        copy = tmp_path / "backup"
        taken = nerve("backup", str(copy), home=home)
        assert taken.returncode == 0, taken.stdout + taken.stderr
        backed_up = signal_ids(copy, "src")[-1]
        wait_for(lambda: len(got(home, "store")) >= backed_up + 8, 30, what="the listener to go on past the copy")
        engine.stop()
    cursor_before = max(event_id for _, event_id, _ in got(home, "store"))
    assert cursor_before >= backed_up + 8
    for suffix in ("-wal", "-shm"):  # put back with the engine stopped, as a person restoring a file would
        (home / "data" / "senses" / f"src.db{suffix}").unlink(missing_ok=True)
    (home / "data" / "senses" / "src.db").write_bytes((copy / "data" / "senses" / "src.db").read_bytes())
    received = len(got(home, "store"))
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(signal_ids(home, "src")) >= cursor_before + 3, 30, what="the restored source to signal")
        wait_for(lambda: {i for _, i, _ in got(home, "store")[received:]} >= set(range(backed_up + 1, cursor_before + 3)),
                 30, what="the listener to receive the restored lineage's signals")
        engine.stop()
    again = [i for _, i, _ in got(home, "store")[received:]]
    assert again[: cursor_before + 2 - backed_up] == list(range(backed_up + 1, cursor_before + 3))  # once, in order
    row = read_logs(home, "system", "cursor_restarted", "store")[0]["payload"]
    assert (row["why"], row["was_at"], row["reads_from"]) == ("restored", cursor_before, backed_up)
    assert row["identity_was"] == row["identity_now"]
