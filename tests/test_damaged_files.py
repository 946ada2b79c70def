"""Damaged files and broken connections: every command says what is wrong and where, never a traceback.

Each database under data/ is damaged in four ways (random bytes, a folder in
its place, truncated to 0 bytes, pages overwritten behind a valid header) and
the commands that read it run on each; an offline emit meets a read-only
instance; every command that talks to the engine meets one that resets the
connection; a sense database whose engine tables hold what Nerve never writes
fails to load as damaged, not with Nerve's own TypeError.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, nerve, wait_for
from typer.testing import CliRunner

from nerve_cli.cli import output
from nerve_cli.cli.app import app
from nerve_cli.cli.status_cmd import STOPPED
from nerve_cli.store.lock import InstanceLock

COMMANDS = {  # what reads each file (the engine is stopped)
    "logs.db": [["status"], ["sense", "list"], ["sense", "show", "cpu-percent"], ["logs"], ["thread", "list"],
                ["doctor"], ["mesh"], ["archive", "--dry-run"], ["gc", "--dry-run"]],
    "events.db": [["status"], ["emit", "door", "{}"], ["archive", "--dry-run"], ["gc", "--dry-run"], ["logs"]],
    "senses/cpu-percent.db": [["status"], ["sense", "list"], ["sense", "show", "cpu-percent"], ["archive", "--dry-run"],
                            ["gc", "--dry-run"], ["backup", "BACKUP"]],
    "senses/nerve-health.db": [["sense", "list"], ["status", "--json"]],
}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An instance whose engine ran once (logs.db, sense and health databases) and got one offline emit."""
    home = tmp_path_factory.mktemp("damage") / "home"
    assert nerve("init", home=home).returncode == 0
    # until every file the damage applies to exists (a fixed --for is too short on a loaded machine)
    with RunningEngine(home) as engine:
        wait_for(lambda: completes(home, "cpu-percent") and completes(home, "nerve-health"), 30,
                 what="cpu-percent and nerve-health to compute once")
        assert engine.stop()[0] == 0
    assert nerve("emit", "door", "{}", home=home).returncode == 0
    for file in COMMANDS:
        assert (home / "data" / file).is_file(), file
    return home


def damage(path: Path, kind: str) -> None:
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    if kind == "garbage":
        path.write_bytes(bytes((i * 131 + 7) % 256 for i in range(8192)))
    elif kind == "folder":
        path.unlink()
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":  # SQLite waits for ever for the other end of a FIFO
        path.unlink()
        os.mkfifo(path)
    elif kind == "pages":  # the 100-byte header reads; every page after it is noise
        data = bytearray(path.read_bytes())
        data[100:] = bytes((i * 7) % 256 for i in range(100, len(data)))
        path.write_bytes(bytes(data))


def run(home: Path, args: list[str], tmp_path: Path) -> tuple[int, str]:
    args = [str(tmp_path / "backup") if a == "BACKUP" else a for a in args]
    output.reset()
    result = CliRunner().invoke(app, [*args, "--home", str(home)])
    output.reset()
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    text = result.output + (f"\n{type(result.exception).__name__}: {result.exception}" if crashed else "")
    return (99 if crashed else result.exit_code), text


@pytest.mark.parametrize("kind", ["garbage", "folder", "empty", "pages", "fifo"])
def test_a_damaged_database_is_named_by_every_command_that_reads_it(base: Path, tmp_path: Path, kind: str) -> None:
    failures = []
    for file, commands in COMMANDS.items():
        home = tmp_path / "home"
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(base, home)
        damage(home / "data" / file, kind)
        for args in commands:
            code, text = run(home, args, tmp_path)
            shutil.rmtree(tmp_path / "backup", ignore_errors=True)
            stopped = args[0] == "status" and code == STOPPED  # the stopped view: it names what it met damaged
            if code not in (0, 1) and not stopped or "Traceback" in text or "Error:" in text.replace("error:", ""):
                failures.append(f"{file} ({kind}): nerve {' '.join(args)} → exit {code}: {text.strip()[-300:]}")
            elif code == 1 and file.split("/")[-1] not in text and "no engine is running" not in text:
                failures.append(f"{file} ({kind}): nerve {' '.join(args)} failed without naming the file: {text[-300:]}")
            elif stopped and file.split("/")[-1] not in text and not (file != "logs.db" and kind == "pages"):
                # the stopped view reads logs.db; the others it looks at (events.db it reads only for listeners'
                # backlogs): noise past their header stays unseen
                failures.append(f"{file} ({kind}): the stopped view does not name the file: {text[-300:]}")
    assert not failures, "\n".join(failures)


def test_engine_tables_holding_what_nerve_never_writes_are_damage_not_a_typeerror(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(base, home)
    conn = sqlite3.connect(home / "data" / "senses" / "cpu-percent.db")
    conn.execute("UPDATE _migrations SET name = NULL")  # as a page that still reads, with a value gone
    conn.commit()
    conn.close()
    result = nerve("sense", "compute", "cpu-percent", home=home)
    assert result.returncode == 1 and "TypeError" not in result.stdout + result.stderr, result.stderr
    assert "cpu-percent.db is damaged" in result.stdout + result.stderr


class ResettingEngine:
    """A control socket that takes each request and drops the connection unanswered (a killed engine, no fds)."""

    def __init__(self, home: Path) -> None:
        self.lock = InstanceLock(home).acquire()  # as a live engine holds it
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(home / "data" / "nerve.sock"))
        self.server.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.recv(1)  # part of the request read, the rest left unread: closing now resets the peer
            conn.close()

    def close(self) -> None:
        self.server.close()
        self.lock.release()


def test_every_command_meets_a_reset_connection_with_one_line_that_says_what_to_do(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(base, home)
    engine = ResettingEngine(home)
    try:
        for args in (["status"], ["status", "--json"], ["sense", "compute", "cpu-percent"], ["emit", "door", "{}"],
                     ["workflow", "run", "nosuch", "--prompt", "x"], ["thread", "approve", "run-1"]):
            result = nerve(*args, home=home)
            text = result.stdout + result.stderr
            assert result.returncode == 1 and "Traceback" not in text, (args, text[-1500:])
            assert "engine" in text, (args, text)
    finally:
        engine.close()


RO = 'set -e; mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"; shift; exec "$@"'


@pytest.mark.skipif(subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0,
                    reason="needs unprivileged user and mount namespaces (unshare -rm)")
def test_an_offline_emit_on_a_read_only_instance_says_so(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(base, home)
    for path in (home / "data" / "events.db", home / "data" / "events.db-wal", home / "data" / "events.db-shm"):
        path.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
    result = subprocess.run(["unshare", "-rm", "sh", "-c", RO, "sh", str(home), sys.executable, "-m", "nerve_cli",
                             "emit", "door", "{}", "--home", str(home)], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "Read-only file system" in result.stderr and "data" in result.stderr


@pytest.mark.parametrize("file", ["logs.db", "events.db", "senses/cpu-percent.db", "logs.db-wal"])
def test_a_fifo_where_a_database_belongs_is_named_by_the_engine_not_waited_on(base: Path, tmp_path: Path,
                                                                               file: str) -> None:
    """SQLite waits for ever for a FIFO's other end: 31 of 960 damaged runs hung. The engine names it, and stops
    (logs.db: it cannot log) or runs on without what it cannot read (a sense; events.db, read when used)."""
    home = tmp_path / "home"
    shutil.copytree(base, home)
    path = home / "data" / file
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    result = nerve("run", "--for", "3s", home=home, timeout=60)
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text[-3000:]
    named = file.split("/")[-1].removesuffix("-wal")
    assert named in text and "FIFO" in text, text[-3000:]
    assert result.returncode == (1 if file.startswith("logs.db") else 0), text[-3000:]


@pytest.mark.parametrize("kind", ["empty", "pages", "garbage"])
def test_doctor_names_every_damaged_database(base: Path, tmp_path: Path, kind: str) -> None:
    """The damage messages send users to `nerve doctor`, which exited 0 saying nothing about a 0-byte or
    page-corrupt sense database."""
    import json

    home = tmp_path / "home"
    shutil.copytree(base, home)
    damage(home / "data" / "senses" / "cpu-percent.db", kind)
    damage(home / "data" / "events.db", kind)
    code, text = run(home, ["doctor"], tmp_path)
    assert code == 1 and "cpu-percent.db is damaged" in text and "events.db is damaged" in text, text
    code, text = run(home, ["doctor", "--json"], tmp_path)
    found = {d["database"] for d in json.loads(text)["damaged"]}
    assert code == 1 and found == {"senses/cpu-percent.db", "events.db"}, text
    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    code, text = run(clean, ["doctor"], tmp_path)
    assert code == 0 and "every database under data/ reads whole" in text, text


class AnsweringWrongly(ResettingEngine):
    """A program on the engine's socket that answers each request with JSON that is not an object."""

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"[1, 2, 3]\n")
            conn.close()


def test_a_socket_answering_what_the_engine_never_says_is_one_line_not_a_traceback(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(base, home)
    engine = AnsweringWrongly(home)
    try:
        for args in (["status"], ["sense", "compute", "cpu-percent"], ["emit", "door", "{}"],
                     ["workflow", "run", "nosuch", "--prompt", "x"], ["thread", "approve", "run-1"]):
            result = nerve(*args, home=home)
            text = result.stdout + result.stderr
            assert result.returncode == 1 and "Traceback" not in text, (args, text[-1500:])
            assert "not the engine's" in text, (args, text)
    finally:
        engine.close()


@pytest.mark.skipif(subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0,
                    reason="needs unprivileged user and mount namespaces (unshare -rm)")
def test_commands_that_write_on_a_read_only_instance_say_so_in_one_line(base: Path, tmp_path: Path) -> None:
    """On a read-only instance with its databases in place, `sense compute`, `emit`, `emit --json` and
    `sense reset` gave tracebacks (SQLite's "attempt to write a readonly database" from the log's flush)."""
    import json

    home = tmp_path / "home"
    shutil.copytree(base, home)
    env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
    for args in (["sense", "compute", "cpu-percent"], ["emit", "door", "{}"], ["emit", "door", "{}", "--json"],
                 ["sense", "reset", "cpu-percent"], ["sense", "compute", "cpu-percent", "--json"]):
        result = subprocess.run(["unshare", "-rm", "sh", "-c", RO, "sh", str(home), sys.executable, "-m", "nerve_cli",
                                 *args, "--home", str(home)], capture_output=True, text=True, env=env, timeout=60)
        text = result.stdout + result.stderr
        assert result.returncode == 1 and "Traceback" not in text, (args, text[-2000:])
        assert "read-only" in text.lower() or "Read-only" in text, (args, text)
        if "--json" in args:
            assert json.loads(result.stdout)["error"]["type"] == "storage_error", (args, result.stdout)
