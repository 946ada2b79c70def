"""The worker's side of the JSON-lines pipe: protocol fds that user code neither sees nor touches.

User code prints, reads stdin, closes fds and starts child processes. None of
that may reach the protocol: a print between two protocol lines corrupts it, a
read of fd 0 steals the kernel's next message, and `os.close(0)` silently cut
the worker off from the kernel. So at start-up `take_protocol_fds` moves both
pipe ends to high, close-on-exec fds (children never inherit them), points
fd 0 at /dev/null and fd 1 at stderr, and sets `sys.stdout = sys.stderr`.
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from nerve_cli.wire.protocol import MAX_LINE, Message

if TYPE_CHECKING:
    import asyncio


PROTOCOL_FD_MIN = 100  # far above the fds a sense opens (or closes by mistake) in normal use


@dataclass(frozen=True)
class ProtocolFds:
    read: int  # the kernel's messages (was fd 0)
    write: int  # our answers (was fd 1)


def take_protocol_fds() -> ProtocolFds:
    """Move the protocol pipes off fds 0 and 1; fd 0 becomes /dev/null, fd 1 a copy of stderr."""
    sys.stdout.flush()
    fds = ProtocolFds(_move_high(0), _move_high(1))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fds


def _move_high(fd: int) -> int:
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, PROTOCOL_FD_MIN)
    except OSError:  # a very low fd limit: any close-on-exec copy still beats fd 0/1
        return os.dup(fd)


class ProtocolWriter:
    """Writes whole protocol lines to a private fd; one lock so lines never interleave."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self.closed = False

    def send(self, message: Message) -> None:
        self.write(message.encode())

    def write(self, line: bytes) -> None:
        with self._lock:
            if self.closed:
                return
            view = memoryview(line)
            try:
                while view:
                    written = os.write(self.fd, view)
                    view = view[written:]
            except BrokenPipeError:
                self.closed = True  # the kernel is gone; nothing left to tell it

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                os.close(self.fd)


class _ThreadLineReader:
    """Reads protocol lines in a thread: for an input epoll cannot watch (a regular file, /dev/null)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        import asyncio  # only a worker that runs a loop pays for it

        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._loop = loop
        self._stream = os.fdopen(fd, "rb", closefd=False)
        threading.Thread(target=self._pump, name="protocol-in", daemon=True).start()

    def _pump(self) -> None:
        stream = self._stream
        while True:
            line = stream.readline(MAX_LINE)
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
            if not line:
                return

    async def readline(self) -> bytes:
        return await self._queue.get()


# what protocol_reader gives: something with `async readline()` (a string: asyncio loads only where it runs)
ProtocolReader: TypeAlias = "asyncio.StreamReader | _ThreadLineReader"


async def protocol_reader(fd: int) -> ProtocolReader:
    """An asyncio line reader on the protocol's input fd whose line limit matches the protocol's.

    Only a worker that runs an event loop calls this, so only it imports asyncio.
    """
    import asyncio
    from asyncio import unix_events

    # asyncio reads pipes 256 KiB at a time and pays an mmap/munmap per small read;
    # 64 KiB halves the round trip (LIBRARY-NOTES). The kernel's handle does the same.
    unix_events._UnixReadPipeTransport.max_size = 64 * 1024  # type: ignore[attr-defined]
    loop = asyncio.get_running_loop()
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        return _ThreadLineReader(loop, fd)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))
    return reader


class LineReader:
    """Blocking line reads from a file descriptor, for one reader at a time (the sense worker's leader thread).

    Works for any input (pipe, socket, regular file, /dev/null). A line longer
    than `limit` raises ValueError once and is skipped up to its newline.
    """

    def __init__(self, fd: int, limit: int = MAX_LINE) -> None:
        self.fd = fd
        self.limit = limit
        self._buf = bytearray()
        self._skipping = False
        self._eof = False

    def readline(self) -> bytes | None:
        """The next line (with its newline, if it had one), or None at end of input."""
        buf = self._buf
        scanned = 0
        while True:
            end = buf.find(b"\n", scanned)
            if end >= 0:
                line = bytes(buf[: end + 1])
                del buf[: end + 1]
                if self._skipping:
                    self._skipping, scanned = False, 0
                    continue
                return line
            if len(buf) > self.limit or (self._skipping and buf):
                buf.clear()
                scanned = 0
                if not self._skipping:
                    self._skipping = True
                    raise ValueError(f"a line longer than {self.limit} bytes")
            scanned = len(buf)
            if self._eof:
                return None
            chunk = os.read(self.fd, 64 * 1024)
            if not chunk:
                self._eof = True
                if buf and not self._skipping:  # a last line without its newline
                    line = bytes(buf)
                    buf.clear()
                    return line
                return None
            buf += chunk
