"""Files under attack by accident: damaged or emptied databases, a looping sense folder, a symlink to
/proc, other users on the machine, a read-only filesystem."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, nerve, read_logs, wait_for, write_instance

TWO = """
    senses:
      good: {group: g}
      bad: {group: g}
    reflexes:
      - {sense: good, interval: 100ms}
      - {sense: bad, interval: 100ms}
"""
RETURNS_1 = "def compute(db, peers):\n    return 1\n"


def two_senses(home: Path) -> Path:
    return write_instance(home, TWO, {"good": RETURNS_1, "bad": RETURNS_1})


def failed_load(engine: RunningEngine, sense: str) -> str:
    worker = engine.status()["workers"][0]
    assert worker["state"] == "ready" and worker["restarts"] == 0, worker
    return worker["failed"][sense]


def test_per_sense_load_failure_for_a_garbled_sense_db(home: Path) -> None:
    two_senses(home)
    (home / "data" / "senses").mkdir(parents=True)
    bad_db = home / "data" / "senses" / "bad.db"
    bad_db.write_bytes(b"this is not SQLite" * 500)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "good")) >= 3, 15, what="good to keep running")
        why = failed_load(engine, "bad")
        code, output = engine.stop()
    assert code == 0, output
    assert f"{bad_db} is damaged (file is not a database)" in why and "restore it from a backup" in why, why
    assert bad_db.read_bytes().startswith(b"this is not SQLite")  # left as it was, for the user to rescue


def test_per_sense_load_failure_for_a_symlink_loop_in_a_sense_folder(home: Path) -> None:
    two_senses(home)
    shutil.rmtree(home / "senses" / "bad")
    (home / "senses" / "bad").symlink_to("bad")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "good")) >= 3, 15, what="good to keep running")
        why = failed_load(engine, "bad")
        code, output = engine.stop()
    assert code == 0, output
    assert "senses/bad/sense.py" in why, why


def test_corrupt_logs_db_is_reported_with_file_and_fix(home: Path) -> None:
    two_senses(home)
    (home / "data").mkdir()
    (home / "data" / "logs.db").write_bytes(b"garbage" * 1000)
    result = nerve("run", "--for", "5s", home=home)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{home / 'data' / 'logs.db'} is damaged (file is not a database)" in result.stderr
    assert "mv " in result.stderr and ".damaged" in result.stderr


def test_corrupt_health_db_is_reported_with_file_and_fix(home: Path) -> None:
    two_senses(home)
    (home / "data" / "senses").mkdir(parents=True)
    (home / "data" / "senses" / "nerve-health.db").write_bytes(b"garbage" * 1000)
    result = nerve("run", "--for", "5s", home=home)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "nerve-health.db is damaged" in result.stderr and "rm " in result.stderr


def test_corrupt_databases_a_zero_byte_sense_db_is_damage_not_a_new_database(home: Path) -> None:
    two_senses(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "bad")) >= 3, 15)
        engine.stop()
    bad_db = home / "data" / "senses" / "bad.db"
    assert sqlite3.connect(bad_db).execute("SELECT count(*) FROM _signals").fetchone()[0] >= 3
    os.truncate(bad_db, 0)
    for extra in ("-wal", "-shm"):
        Path(str(bad_db) + extra).unlink(missing_ok=True)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "good")) >= 6, 15, what="good to keep running")
        why = failed_load(engine, "bad")
        engine.stop()
    assert "is empty (0 bytes): it was truncated" in why and f"rm {bad_db}" in why, why
    assert bad_db.stat().st_size == 0  # not silently started over
    standalone = nerve("sense", "compute", "bad", home=home)
    assert standalone.returncode == 1 and "0 bytes" in standalone.stderr + standalone.stdout
    assert "Traceback" not in standalone.stderr


BLOBBER = """
def compute(db, peers):
    return db.blobs.put(b"private bytes")
"""


def modes(root: Path) -> dict[str, int]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    out["."] = stat.S_IMODE(root.stat().st_mode)
    return out


def test_data_folder_is_0700_and_its_files_0600(home: Path) -> None:
    config = "senses:\n  blobber: {}\nreflexes:\n  - {sense: blobber, interval: 100ms}\n"
    write_instance(home, config, {"blobber": BLOBBER})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "blobber")) >= 2, 15)
        engine.stop()
    conn = sqlite3.connect(home / "data" / "logs.db")  # a row from three days ago, for the archive to move
    conn.execute("INSERT INTO logs (source, type, ts) VALUES ('system', 'old', ?)", (int(time.time() - 3 * 86400) * 1000,))
    conn.commit()
    conn.close()
    archived = nerve("archive", "--older-than", "1d", home=home)
    assert archived.returncode == 0, archived.stderr
    found = modes(home / "data")
    assert any(k.startswith("archive/") and k.endswith(".jsonl") for k in found), found
    assert any(k.startswith("blobs/") and not os.path.isdir(home / "data" / k) for k in found), found
    loose = {k: oct(m) for k, m in found.items()
             if m != (0o700 if (home / "data" / k).is_dir() else 0o600) and not (k.startswith("blobs/") and m == 0o400)}
    assert not loose, loose


def test_events_db_made_by_an_offline_emit_is_private_and_a_loose_one_is_tightened(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    assert nerve("emit", "door", '{"open": true}', home=home).returncode == 0  # no engine: the CLI creates it
    found = modes(home / "data")
    assert found["."] == 0o700 and found["events.db"] == 0o600, found
    assert not {k: oct(m) for k, m in found.items() if k.startswith("events.db") and m != 0o600}, found
    os.chmod(home / "data" / "events.db", 0o644)  # as an older version left it
    assert nerve("emit", "door", '{"open": false}', home=home).returncode == 0
    assert modes(home / "data")["events.db"] == 0o600


def test_data_folder_of_an_older_instance_is_made_private_at_start(home: Path) -> None:
    config = "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 100ms}\n"
    write_instance(home, config, {"tick": RETURNS_1})
    (home / "data" / "senses").mkdir(parents=True)
    for path in (home / "data", home / "data" / "senses"):
        os.chmod(path, 0o755)
    conn = sqlite3.connect(home / "data" / "senses" / "tick.db")
    conn.execute("CREATE TABLE x (a)")
    conn.close()
    os.chmod(home / "data" / "senses" / "tick.db", 0o644)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "tick"), 15)
        engine.stop()
    found = modes(home / "data")
    assert found["."] == 0o700 and found["senses"] == 0o700 and found["senses/tick.db"] == 0o600, found


def test_file_watcher_does_not_follow_symlinks_out_of_the_instance(home: Path, tmp_path: Path) -> None:
    config = "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 1h}\n"
    write_instance(home, config, {"tick": RETURNS_1})
    (home / "senses" / "proc").symlink_to("/proc/self")
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "senses" / "elsewhere").symlink_to(outside)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        (outside / "sense.py").write_text(RETURNS_1)  # outside the instance: not watched
        (home / "nerve.yaml").write_text(config.replace("1h", "2h"))
        wait_for(lambda: read_logs(home, "system", "config_reloaded"), 15, what="the reload")
        (home / "nerve.yaml").write_text(config.replace("1h", "3h"))
        wait_for(lambda: len(read_logs(home, "system", "config_reloaded")) == 2, 15, what="a second reload")
        code, output = engine.stop()
    assert code == 0, output
    assert "file watching stopped" not in output, output


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


RO = 'set -e; mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"; shift; exec "$@"'


def read_only(home: Path, *args: str) -> subprocess.CompletedProcess:
    """`nerve ARGS` with the instance folder mounted read-only (a private mount namespace)."""
    env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
    return subprocess.run(["unshare", "-rm", "sh", "-c", RO, "sh", str(home),
                           sys.executable, "-m", "nerve_cli", *args, "--home", str(home)],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.skipif(not _unshare_works(), reason="needs unprivileged user and mount namespaces (unshare -rm)")
def test_read_only_filesystem_run_fails_cleanly_and_logs_still_read(home: Path) -> None:
    two_senses(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "good")) >= 2, 15)
        engine.stop()
    run = read_only(home, "run", "--for", "2s")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "Read-only file system" in run.stderr and "data/nerve.lock" in run.stderr
    logs = read_only(home, "logs", "--type", "engine_stopped")
    assert logs.returncode == 0 and "Traceback" not in logs.stderr, logs.stderr
    assert "engine_stopped" in logs.stdout
    edit = read_only(home, "sense", "disable", "bad")
    assert edit.returncode == 1 and "Traceback" not in edit.stderr and "Read-only file system" in edit.stderr
