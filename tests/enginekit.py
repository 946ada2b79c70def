"""Build tmp instances and run the real engine (`python -m nerve_cli run`) against them.

Conditions are polled with a deadline in idle-machine seconds (loadclock); nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

from conftest import nerve  # noqa: F401 (re-exported: engine tests take it from here)
from loadclock import IdleClock, scaled

NO_TABLES = "# no tables: this sense only emits signals\n"


def write_instance(home: Path, config: str, senses: dict[str, str], schemas: dict[str, str] | None = None) -> Path:
    """An instance folder with nerve.yaml and senses/<name>/sense.py (schema.py optional)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "nerve.yaml").write_text(textwrap.dedent(config))
    for name, code in senses.items():
        write_sense(home, name, code, (schemas or {}).get(name, NO_TABLES))
    return home


def write_sense(home: Path, name: str, code: str, schema: str = NO_TABLES) -> None:
    folder = home / "senses" / name
    (folder / "migrations").mkdir(parents=True, exist_ok=True)
    (folder / "schema.py").write_text(textwrap.dedent(schema))
    (folder / "sense.py").write_text(textwrap.dedent(code))


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    """Poll `condition` until it is truthy; `timeout` is in idle-machine seconds (loadclock): longer under load."""
    clock = IdleClock(timeout)
    while True:
        value = condition()
        if value:
            return value
        if clock.expired():
            raise AssertionError(f"timed out after {timeout}s of idle-machine time ({clock.wall():.1f}s of wall "
                                 f"time) waiting for {what}")
        time.sleep(interval)


def read_logs(home: Path, source: str | None = None, type_: str | None = None, ref: str | None = None) -> list[dict]:
    path = home / "data" / "logs.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        where, params = [], []
        for col, val in (("source", source), ("type", type_), ("ref_id", ref)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = "SELECT id, source, type, ref_id, payload, ts FROM logs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = conn.execute(sql + " ORDER BY id", params).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [{"id": r[0], "source": r[1], "type": r[2], "ref": r[3],
             "payload": json.loads(r[4]) if r[4] else None, "ts": r[5]} for r in rows]


def thread_statuses(home: Path) -> dict[str, str]:
    """Every thread's status in workflow_runs, by run_id."""
    conn = sqlite3.connect(home / "data" / "logs.db")
    try:
        return dict(conn.execute("SELECT run_id, status FROM workflow_runs"))
    finally:
        conn.close()


def sense_rows(home: Path, sense: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of a query on a sense's own database, read-only; [] before the file or the table exists."""
    path = home / "data" / "senses" / f"{sense}.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def last_signal(home: Path, sense: str):
    """The payload of a sense's newest signal, read from its own database (None before the first)."""
    path = home / "data" / "senses" / f"{sense}.db"
    if not path.exists():
        return None
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT payload FROM _signals ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return json.loads(row[0]) if row else None


def starts(home: Path, sense: str) -> list[dict]:
    return read_logs(home, "reflex", "run_start", sense)


def completes(home: Path, sense: str) -> list[dict]:
    return read_logs(home, "reflex", "run_complete", sense)


def errors(home: Path, sense: str | None = None) -> list[dict]:
    return read_logs(home, "system", "error", sense)



def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    env.pop("NERVE_HOME", None)
    return env


def _limit_fds(count: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (count, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


class RunningEngine:
    """`nerve run` as a child process; stop() sends SIGTERM and returns (code, output)."""

    def __init__(self, home: Path, *args: str, nofile: int | None = None, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.log_path = home.parent / f"engine-{time.monotonic_ns()}.out"
        self._out = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nerve_cli", "run", "--home", str(home), "-vv", *args],
            stdout=self._out, stderr=subprocess.STDOUT, env={**_env(), **(env or {})},
            preexec_fn=None if nofile is None else lambda: _limit_fds(nofile),
        )

    def output(self) -> str:
        return self.log_path.read_text()

    def wait_ready(self, groups: int = 1, timeout: float = 20.0) -> None:
        """Until this engine answers and at least `groups` of its workers are ready."""
        def ready() -> bool:
            if self.proc.poll() is not None:
                return True
            try:
                workers = self.status()["workers"]
            except Exception:
                return False
            return sum(1 for w in workers if w["state"] == "ready") >= groups

        wait_for(ready, timeout, what="workers to start")
        assert self.proc.poll() is None, self.output()

    def status(self) -> dict:
        from nerve_cli.ops.client import request

        return request(self.home, "status")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(scaled(timeout))
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._out.close()
        return code, self.output()

    def __enter__(self) -> "RunningEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(scaled(10))
        self._out.close()


def free_port() -> int:
    """A TCP port free on loopback now (for --metrics / --webhooks)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_samples(port: int) -> list[tuple[str, dict, float]]:
    """(sample name, labels, value) of a scrape of --metrics, read with prometheus_client's own parser."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]
