"""The engine's watch of data/senses (store.dbwatch): a sense worker learns that a name along its database's
path came or went without two `stat` calls per check, and never misses one that did.

The engine-level deletions (a database deleted between computes, during one, its -wal under the worker) are
in test_rebuilt_sources.py, where every worker has this watch.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from enginekit import RunningEngine, wait_for, write_instance

from nerve_cli.store import dbwatch
from nerve_cli.store.dbwatch import DbWatch, WatchReader
from nerve_cli.worker import compute
from nerve_cli.worker.compute import LoadedSense, file_id


@pytest.fixture
def watched(tmp_path: Path):
    folder = tmp_path / "home" / "data" / "senses"
    folder.mkdir(parents=True)
    watch = DbWatch.open(folder)
    assert watch is not None
    yield folder, watch, WatchReader(*watch.fds, watch.folder)
    watch.close()


def settled(watch: DbWatch, reader: WatchReader) -> int:
    """What a worker reads once the engine's loop has drained what is pending."""
    watch.drain()
    quiet = reader.quiet()
    assert quiet >= 0 and quiet % 2 == 0
    return quiet


def test_the_number_holds_while_nothing_comes_or_goes_and_moves_when_a_name_does(watched) -> None:
    folder, watch, reader = watched
    quiet = settled(watch, reader)
    (folder / "x.db").write_bytes(b"")
    assert reader.quiet() == -1  # pending: not drained yet
    after = settled(watch, reader)
    assert after != quiet
    with open(folder / "x.db", "ab") as f:  # writes are not names coming or going
        f.write(b"data")
    assert reader.quiet() == after
    (folder / "x.db").rename(folder / "y.db")
    assert reader.quiet() == -1
    assert settled(watch, reader) != after


def test_a_folder_above_renamed_counts_and_a_watched_folder_moved_ends_the_fast_answer(watched, tmp_path) -> None:
    folder, watch, reader = watched
    quiet = settled(watch, reader)
    (tmp_path / "home" / "data" / "other").mkdir()  # a name in a folder above: counted (it may be the path's)
    assert reader.quiet() == -1 and settled(watch, reader) != quiet
    (tmp_path / "home" / "data").rename(tmp_path / "home" / "moved")  # the watches no longer follow the path
    watch.drain()
    assert watch.lost
    (tmp_path / "home" / "data").mkdir()
    watch.drain()
    assert reader.quiet() == -1  # for good: every check is the full one


def test_a_path_through_a_symlink_is_not_watched(tmp_path: Path) -> None:
    (tmp_path / "real" / "senses").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert DbWatch.open(tmp_path / "link" / "senses") is None


def test_a_worker_attaches_only_to_the_watch_its_environment_names(watched) -> None:
    folder, watch, _ = watched
    assert dbwatch._attach(watch.environ()) is not None
    r, w = os.pipe()
    try:  # an environment outliving its fds (a process the engine did not start as a worker)
        assert dbwatch._attach(f"{r} {w} {folder}") is None
        assert dbwatch._attach(f"{watch.inotify_fd} {r} {folder}") is None
    finally:
        os.close(r)
        os.close(w)
    assert dbwatch._attach("") is None and dbwatch._attach("5 x /tmp") is None


def loaded(db_path: Path, reader: WatchReader) -> LoadedSense:
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()

    class Db:  # what db_replaced reads of a SenseDB
        path = db_path

    sense = LoadedSense(name="s", folder=db_path.parent, home=db_path.parent, db=Db(), peers=None, compute=None,
                        is_async=False, nargs=1, db_file=file_id(db_path), watch=reader)
    sense.wal_file = file_id(f"{db_path}-wal")
    sense.conn = conn  # kept open, as a worker keeps its database
    return sense


def test_a_sense_checks_its_files_by_stat_only_when_a_name_came_or_went(watched, monkeypatch) -> None:
    folder, watch, reader = watched
    sense = loaded(folder / "s.db", reader)
    stats = []
    real_stat = os.stat
    monkeypatch.setattr(compute.os, "stat", lambda p, *a, **k: (stats.append(p), real_stat(p, *a, **k))[1])
    settled(watch, reader)
    assert not sense.db_replaced() and len(stats) == 2  # the first check: the file and its -wal
    assert not sense.db_replaced() and not sense.db_replaced() and len(stats) == 2  # then none
    (folder / "t.db").write_bytes(b"")  # another sense's file: a full check, which finds its own
    assert not sense.db_replaced() and len(stats) == 4
    watch.drain()
    assert not sense.db_replaced() and len(stats) == 6
    assert not sense.db_replaced() and len(stats) == 6


@pytest.mark.parametrize("change", ["delete", "replace", "wal", "folder"])
def test_a_sense_never_misses_its_file_deleted_or_replaced_drained_or_not(watched, tmp_path, change) -> None:
    folder, watch, reader = watched
    for drained in (False, True):
        db = folder / f"s{drained:d}.db"
        sense = loaded(db, reader)
        settled(watch, reader)
        assert not sense.db_replaced() and not sense.db_replaced()
        if change == "delete":
            db.unlink()
        elif change == "replace":
            shutil.copy(db, folder / "new.db")
            (folder / "new.db").replace(db)
        elif change == "wal":
            Path(f"{db}-wal").unlink()
        else:
            folder.rename(folder.with_name("gone"))
        if drained:  # the engine's loop has read the event already: the number moved
            watch.drain()
        assert sense.db_replaced()
        if change == "folder":
            return


def test_an_engines_sense_worker_has_the_watch_and_its_sense_code_children_do_not(home: Path) -> None:
    out = home / "fds.txt"
    write_instance(home, """
        senses:
          s: {}
        reflexes:
          - {sense: s, interval: 200ms}
    """, {"s": f"import os\n\ndef compute(db, peers):\n    os.system('ls -l /proc/self/fd > {out}')\n    return 1\n"})
    for warm in ("1", "0"):
        out.unlink(missing_ok=True)
        with RunningEngine(home, env={"NERVE_WARM_WORKERS": warm}) as engine:
            engine.wait_ready()
            pid = engine.status()["workers"][0]["pid"]
            targets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert "anon_inode:inotify" in targets, (warm, targets)
            assert any(t.startswith("/memfd:nerve-dbwatch") for t in targets), (warm, targets)
            wait_for(lambda: out.exists() and out.read_text(), 20, what="the sense's child to list its fds")
            engine.stop()
        assert "inotify" not in out.read_text() and "nerve-dbwatch" not in out.read_text(), warm
