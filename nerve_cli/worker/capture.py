"""What a compute prints, attributed to its sense and compute id.

`sys.stdout` and `sys.stderr` in a sense worker are replaced by one
`CapturedStreams` pair. While a compute runs, its task (async) or thread
(sync) carries a context variable naming it; a complete line written there is
sent to the kernel as `Output(id, sense, stream, text)` before the compute's
answer, so the kernel can show it under the sense's name and keep it in the
log. Anything written outside a compute (a print at import time, a thread the
user started) goes to the worker's stderr as before, where the kernel shows it
under the group's name.

Bounded: at most MAX_LINES lines of at most MAX_LINE_CHARS characters per
compute are sent; the rest are counted and reported in one closing line. A
write of bytes to fd 1 or 2 (a C extension, a child process) is not seen here.
"""

from __future__ import annotations

import contextvars
import io
import logging
import sys
import threading
from typing import Any, Callable

from nerve_cli.wire.protocol import Output

MAX_LINES = 200
MAX_LINE_CHARS = 2000

_current: contextvars.ContextVar["Capture | None"] = contextvars.ContextVar("nerve_compute_output", default=None)


class Capture:
    """The output of one compute: partial lines per stream, and how many lines were sent or dropped."""

    def __init__(self, compute_id: int, sense: str, send: Callable[[Output], None]) -> None:
        self.id = compute_id
        self.sense = sense
        self.send = send
        self.partial = {"stdout": "", "stderr": ""}
        self.sent = 0
        self.dropped = 0
        self.lock = threading.Lock()  # a compute may print from threads it starts while still inside its context

    def write(self, stream: str, text: str) -> None:
        with self.lock:
            buffered = self.partial[stream] + text
            *lines, self.partial[stream] = buffered.split("\n")
            for line in lines:
                self._line(stream, line)

    def close(self) -> None:
        """Send partial lines and, when lines were dropped, say how many."""
        with self.lock:
            for stream, rest in self.partial.items():
                if rest:
                    self._line(stream, rest)
                self.partial[stream] = ""
            if self.dropped:
                self.send(Output(self.id, self.sense, "stderr",
                                 f"[nerve: {self.dropped} more line(s) of output not kept; the limit is {MAX_LINES}]"))
                self.dropped = 0

    def _line(self, stream: str, line: str) -> None:
        if self.sent >= MAX_LINES:
            self.dropped += 1
            return
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"… [{len(line) - MAX_LINE_CHARS} more characters]"
        self.sent += 1
        self.send(Output(self.id, self.sense, stream, line.rstrip("\r")))


class _Stream(io.TextIOBase):
    """A text stream that routes writes to the running compute's Capture, else to the fallback."""

    def __init__(self, name: str, fallback: Any) -> None:
        self.name = name
        self.fallback = fallback

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is None:
            return self.fallback.write(text)
        capture.write(self.name, text)
        return len(text)

    def flush(self) -> None:
        if _current.get() is None:
            self.fallback.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fallback.fileno()  # subprocess and faulthandler want a real fd: the worker's stderr

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.fallback, "encoding", "utf-8")


def install_capture() -> None:
    """Route this process's sys.stdout / sys.stderr through the capture (after the protocol took fd 1)."""
    fallback = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    sys.stdout = _Stream("stdout", fallback)
    sys.stderr = _Stream("stderr", fallback)


def current_compute() -> Capture | None:
    """The compute this task or thread runs (None outside a compute)."""
    return _current.get()


class ComputeAwareFormatter(logging.Formatter):
    """The worker's own log format outside a compute; inside one, a user's log record reads as the user wrote it."""

    _inside = logging.Formatter("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if _current.get() is None:
            return super().format(record)
        return self._inside.format(record)


class capturing:
    """`with capturing(capture):` attributes this task's or thread's writes to one compute."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def __enter__(self) -> Capture:
        self.token = _current.set(self.capture)
        return self.capture

    def __exit__(self, *exc: object) -> None:
        _current.reset(self.token)
        self.capture.close()
