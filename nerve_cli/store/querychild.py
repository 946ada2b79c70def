"""`read_query` in a child process, killed at its deadline: a time limit no single SQLite step can outrun.

`read_query`'s progress handler stops a query between SQLite's steps, but one
step can take seconds (`instr` over a 16 MB string is one call of one
function), and nothing interrupts it. So where the asker is not trusted (an
agent through `nerve mcp`) each query runs in a child process that the asker
kills when the deadline passes (`timeout` and a little slack for the answer to
arrive), and the next query gets a fresh child. A child that answered is kept
for the next query (at most `MAX_IDLE`), so a query costs a pipe round trip,
not a process start.

The child reads one JSON request per line on stdin and writes one JSON answer
per line on stdout: `{"result": {...}}` or `{"error": {"type", "message"}}`.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.errors import NerveError
from nerve_cli.store.readquery import MAX_TIMEOUT, QueryRefused, QueryResult, read_query

MAX_IDLE = 2  # children kept between queries
SLACK = 0.25  # seconds past the query's own timeout before its child is killed
START_SLACK = 5.0  # a new child's start (imports) is not the query's time


class QueryChildren:
    def __init__(self) -> None:
        self._idle: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def run(self, path: Path, sql: str, params: Any = None, *, max_rows: int = 100, timeout: float = 2.0) -> QueryResult:
        """As `read_query`, in a child: QueryRefused, or NerveError (the time limit passed, or any failure)."""
        timeout = max(0.01, min(float(timeout), MAX_TIMEOUT))
        child, fresh = self._take()
        request = {"path": str(path), "sql": sql, "params": params, "max_rows": max_rows, "timeout": timeout}
        try:
            assert child.stdin is not None
            child.stdin.write(orjson.dumps(request) + b"\n")
            child.stdin.flush()
            line = _read_line(child, timeout + SLACK + (START_SLACK if fresh else 0.0))
        except (OSError, ValueError):
            line = None
        if line is None:  # past its deadline (or gone): killed, never reused
            _kill(child)
            raise NerveError(f"query stopped after {timeout:g}s (the time limit): narrow it with WHERE or LIMIT")
        self._give_back(child)
        answer = orjson.loads(line)
        if "error" in answer:
            error = answer["error"]
            raise (QueryRefused if error["type"] == "refused" else NerveError)(error["message"])
        result = answer["result"]
        return QueryResult(result["columns"], result["rows"], result["truncated_by"], result["elapsed_s"])

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            _kill(child)

    def _take(self) -> tuple[subprocess.Popen, bool]:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.poll() is None:
                    return child, False
        child = subprocess.Popen([sys.executable, "-m", "nerve_cli.store.querychild"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        return child, True

    def _give_back(self, child: subprocess.Popen) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(child)
                return
        _kill(child)


def _read_line(child: subprocess.Popen, within: float) -> bytes | None:
    """One line from the child's stdout within `within` seconds, else None."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    deadline = time.monotonic() + within
    chunks: list[bytes] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)


def _kill(child: subprocess.Popen) -> None:
    try:
        child.kill()
        child.wait(5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for stream in (child.stdin, child.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def serve() -> None:
    """The child: answer each request line until stdin closes."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = orjson.loads(line)
        try:
            result = read_query(Path(request["path"]), request["sql"], request["params"],
                                max_rows=request["max_rows"], timeout=request["timeout"])
            answer: dict[str, Any] = {"result": {"columns": result.columns, "rows": result.rows,
                                                 "truncated_by": result.truncated_by, "elapsed_s": result.elapsed_s}}
        except QueryRefused as exc:
            answer = {"error": {"type": "refused", "message": str(exc)}}
        except NerveError as exc:
            answer = {"error": {"type": "error", "message": str(exc)}}
        out.write(orjson.dumps(answer, default=str) + b"\n")
        out.flush()


if __name__ == "__main__":
    serve()
