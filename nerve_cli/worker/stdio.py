"""The worker's side of the JSON-lines pipe: keep the real stdout for protocol lines only.

User code prints, and so do libraries and child processes it starts. All of
that must land on stderr, never between two protocol lines, so at start-up
the worker duplicates fd 1 for itself, points fd 1 at stderr and sets
`sys.stdout = sys.stderr`.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from asyncio import unix_events

from nerve_cli.wire.protocol import MAX_LINE, Message

# asyncio reads pipes 256 KiB at a time and pays an mmap/munmap per small read;
# 64 KiB halves the round trip (LIBRARY-NOTES). The kernel's handle does the same.
unix_events._UnixReadPipeTransport.max_size = 64 * 1024  # type: ignore[attr-defined]


class ProtocolWriter:
    """Writes whole protocol lines to a private fd; one lock so lines never interleave."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self.closed = False

    @classmethod
    def take_stdout(cls) -> ProtocolWriter:
        """Claim the real stdout for the protocol and send everything else written to fd 1 to stderr."""
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return cls(fd)

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
    """Reads stdin lines in a thread: for a stdin epoll cannot watch (a regular file, /dev/null)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._loop = loop
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def _pump(self) -> None:
        stream = sys.stdin.buffer
        while True:
            line = stream.readline(MAX_LINE)
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
            if not line:
                return

    async def readline(self) -> bytes:
        return await self._queue.get()


async def stdin_reader() -> asyncio.StreamReader | _ThreadLineReader:
    """An asyncio line reader on stdin whose line limit matches the protocol's."""
    loop = asyncio.get_running_loop()
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()):
        return _ThreadLineReader(loop)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    return reader
