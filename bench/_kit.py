"""Shared helpers for the engine benchmarks: tmp instances, the real engine, floors, verdicts.

Every benchmark builds its own instance in a temp dir, runs the real kernel
(`python -m nerve_cli run`) as a subprocess, measures, and prints its figures
beside a floor measured in the same run (the machine is noisy: compare ratios
within one run, never against fixed numbers from another day).

Run directly, this module only says what it is (`make bench` runs every
`bench/*.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

NO_TABLES = "# no tables: this sense only emits signals\n"

# one JSON line in, the same object back: the cheapest possible worker
# a workflow of two trivial roles taking turns for `maxRounds` rounds: the cost of the machinery alone
PINGPONG_WORKFLOW = '''
from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

async def ping(messages):
    return RoleResult("ping", {})

async def pong(messages):
    return RoleResult("pong", {})

def route(messages):
    if len(messages) > messages[0].meta["maxRounds"]:
        return END
    return "ping" if messages[-1].role != "ping" else "pong"

workflow = WorkflowDefinition(roles={"ping": ping, "pong": pong}, moderator=route)
'''

ECHO_CHILD = """
import json, sys
write, read = sys.stdout.write, sys.stdin.readline
for line in iter(read, ""):
    write(json.dumps(json.loads(line)) + "\\n")
    sys.stdout.flush()
"""


# -- instances -----------------------------------------------------------------

@contextmanager
def instance(config: str, senses: dict[str, str], schemas: dict[str, str] | None = None) -> Iterator[Path]:
    """A tmp instance folder (nerve.yaml + senses/<name>/), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="nerve-bench-"))
    home = root / "home"
    try:
        home.mkdir()
        (home / "nerve.yaml").write_text(textwrap.dedent(config))
        for name, code in senses.items():
            folder = home / "senses" / name
            (folder / "migrations").mkdir(parents=True)
            (folder / "schema.py").write_text(textwrap.dedent((schemas or {}).get(name, NO_TABLES)))
            (folder / "sense.py").write_text(textwrap.dedent(code))
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise SystemExit(f"bench: timed out after {timeout}s waiting for {what}")


def wait_until(condition: Callable[[], Any], timeout: float, interval: float = 0.05) -> bool:
    """Like wait_for, but a timeout is a result to report (a missed target), not a crash."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def query(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows from a database the engine is writing (read-only; [] while it does not exist yet)."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def logs(home: Path, type_: str, ref: str | None = None, source: str = "reflex") -> list[dict]:
    """Log rows of one type as {ref, payload, ts}, in id order."""
    sql = "SELECT ref_id, payload, ts FROM logs WHERE source = ? AND type = ?"
    params: tuple = (source, type_)
    if ref is not None:
        sql += " AND ref_id = ?"
        params += (ref,)
    rows = query(home / "data" / "logs.db", sql + " ORDER BY id", params)
    return [{"ref": r[0], "payload": json.loads(r[1]) if r[1] else None, "ts": r[2]} for r in rows]


def count_logs(home: Path, type_: str, source: str = "reflex") -> int:
    rows = query(home / "data" / "logs.db", "SELECT count(*) FROM logs WHERE source = ? AND type = ?", (source, type_))
    return rows[0][0] if rows else 0


def signals(home: Path, sense: str) -> list[dict]:
    rows = query(home / "data" / "senses" / f"{sense}.db", "SELECT ts, payload FROM _signals ORDER BY id")
    return [{"ts": r[0], "payload": json.loads(r[1])} for r in rows]


# -- the engine ------------------------------------------------------------------

# where a bench runs `python -m nerve_cli ...`: `-m` puts the cwd first on sys.path, so from the checkout the
# checkout's nerve_cli would run whatever NERVE_BENCH_SRC says
CLI_CWD = tempfile.gettempdir()


def engine_env() -> dict[str, str]:
    """The engine's environment. NERVE_BENCH_SRC=/path/to/a/copy runs a scratch copy of nerve_cli
    (kernel and workers alike), to measure a proposed kernel change against the checkout's."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("NERVE_HOME", None)
    if src := os.environ.get("NERVE_BENCH_SRC"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def source() -> str:
    """Which nerve_cli the engine runs, for the report header."""
    src = os.environ.get("NERVE_BENCH_SRC")
    return f"nerve_cli from {src}" if src else "nerve_cli from the checkout"


class Engine:
    """`nerve run` as a child process (no -v: the console costs nothing)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.out_path = home.parent / "engine.out"
        self._out = open(self.out_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "nerve_cli", "run", "--home", str(home), *args],
                                     stdout=self._out, stderr=subprocess.STDOUT, env={**engine_env(), **(env or {})},
                                     cwd=home.parent)  # not the checkout: `-m` puts the cwd first on sys.path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, groups: int, timeout: float = 30.0) -> None:
        wait_for(lambda: count_logs(self.home, "worker_started", "system") >= groups or self.proc.poll() is not None,
                 timeout, what=f"{groups} worker group(s) to start")
        if self.proc.poll() is not None:
            raise SystemExit(f"bench: the engine exited early:\n{self.out_path.read_text()}")

    def request(self, op: str, **args: Any) -> dict:
        from nerve_cli.ops.client import request

        return request(self.home, op, **args)

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self._out.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` so far, in ns (schedstat; psutil's cpu_times tick at 10 ms)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total


def family(pid: int) -> list[int]:
    """The kernel's pid and its workers' pids (not the warm template's: it only forks them)."""
    import psutil

    pids = [pid]
    for child in psutil.Process(pid).children():
        try:
            if "template" not in child.cmdline():
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


# -- floors ----------------------------------------------------------------------


class Client:
    """One control-socket connection, request after request."""

    def __init__(self, home: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(home / "data" / "nerve.sock"))
        self.buf = b""

    def emit(self, channel: str, payload: object) -> dict:
        self.sock.sendall(json.dumps({"op": "emit", "channel": channel, "payload": payload}).encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("engine closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.sock.close()


def paced_emits(home: Path, channel: str, count: int, every_s: float = 0.005) -> None:
    """`count` emits of {"t": the sender's monotonic ns} on one control-socket connection, one every `every_s`."""
    client = Client(home)
    next_at = time.monotonic()
    for _ in range(count):
        next_at += every_s
        client.emit(channel, {"t": time.monotonic_ns()})
        time.sleep(max(0.0, next_at - time.monotonic()))
    client.close()


def pipe_round_trips(n: int = 3000, children: int = 6, warmup: int = 100) -> list[float]:
    """Round trips (µs) of one small JSON line to a trivial echo child over blocking pipes.

    Spread over several fresh children: on a 2-vCPU VM a round trip costs about
    twice as much when the two processes land on different CPUs as on the same
    one, and a single child gets one placement for its whole life.
    """
    out: list[float] = []
    for _ in range(children):
        out += _echo(n // children, warmup)
    return out


def _echo(n: int, warmup: int) -> list[float]:
    child = subprocess.Popen([sys.executable, "-c", ECHO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             bufsize=0)
    write, read = child.stdin.write, child.stdout.readline  # type: ignore[union-attr]
    out = []
    try:
        for i in range(n + warmup):
            t0 = time.perf_counter_ns()
            write(json.dumps({"type": "compute", "id": i, "sense": "b", "reason": "on a"}).encode() + b"\n")
            json.loads(read())
            if i >= warmup:
                out.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(5)
    return out


def asyncio_round_trips(n: int = 3000, warmup: int = 300) -> list[float]:
    """The same round trip with the parent on stock asyncio streams."""
    import asyncio

    async def run() -> list[float]:
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", ECHO_CHILD, stdin=asyncio.subprocess.PIPE,
                                                     stdout=asyncio.subprocess.PIPE)
        out = []
        for i in range(n + warmup):
            t0 = time.perf_counter_ns()
            child.stdin.write(json.dumps({"type": "compute", "id": i, "sense": "b", "reason": "on a"}).encode() + b"\n")
            json.loads(await child.stdout.readline())
            if i >= warmup:
                out.append((time.perf_counter_ns() - t0) / 1000)
        child.stdin.close()
        await child.wait()
        return out

    return asyncio.run(run())


# -- statistics and the report ------------------------------------------------------

def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Report:
    """A table of figures, each with the floor it is compared with, its target and a verdict."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.notes: list[str] = []

    def row(self, figure: str, value: str, floor: str = "", target: str = "", met: bool | None = None) -> None:
        verdict = "" if met is None else ("met" if met else "MISSED")
        self.rows.append((figure, value, floor, target, verdict))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def print(self) -> None:
        head = ("figure", "value", "floor (same run)", "target", "")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(5)]
        print(f"\n{self.title}")
        for r in [head, *self.rows]:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        for text in self.notes:
            print(f"  - {text}")
        sys.stdout.flush()


# -- the goals: one row each, printed together at the end of `make bench` -------------------

GOALS_ENV = "NERVE_BENCH_GOALS"  # a file each script appends its goal rows to (make bench sets it)
GOALS = (  # the rows in the order the summary prints them
    "sense worker spawn → ready",
    "save → the new code's first signal",
    "save → the new code's first signal, `interval: 1m`",
    "idle sense worker memory, PSS (RSS)",
    "sense worker memory after 600 computes, PSS",
    "signal hop across groups, median / p99",
    "a person's compute with 50 queued, median",
    "workflow round overhead, median / p99",
    "`nerve status` with 1,000 senses",
    "`nerve config check`",
    "`nerve mcp` spawn → tools/list answered",
    "archive 1,000,000 log rows",
    "emit → `nerve agent wait` returns, median",
    "hook POST → answer, p99",
)


def goal(figure: str, value: str, floor: str, target: str, met: bool) -> None:
    """Record one goal row (figure and its floor from the same run) for the summary, when make bench asks."""
    assert figure in GOALS, figure
    if path := os.environ.get(GOALS_ENV):
        with open(path, "a") as out:
            out.write(json.dumps({"figure": figure, "value": value, "floor": floor, "target": target, "met": met,
                                  "load": os.getloadavg()[0]}) + "\n")


def print_goals(path: str) -> None:
    rows = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        rows[row["figure"]] = row
    report = Report(f"the goals, each beside its floor from the same script's run ({machine()})")
    for figure in GOALS:
        row = rows.get(figure)
        if row is None:
            report.row(figure, "not measured", "", "", None)
        else:
            report.row(figure, row["value"], row["floor"], row["target"], row["met"])
    loads = [row["load"] for row in rows.values()]
    if loads:
        report.note(f"load average while measured: {min(loads):.1f}–{max(loads):.1f}")
    report.print()


def bare_python_ms(runs: int = 9) -> float:
    """A bare `python -c pass`, start to exit (median of `runs`, ms): the floor of anything that starts Python."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def us(value: float) -> str:
    return f"{value:,.0f} µs"


def machine() -> str:
    import platform

    return f"{os.cpu_count()} cpu, python {platform.python_version()}, load {os.getloadavg()[0]:.2f}, {source()}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["goals"]:
        print_goals(sys.argv[2])
    else:
        print("bench/_kit.py: shared helpers for the engine benchmarks (nothing to measure here)")
