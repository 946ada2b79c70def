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
import select
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


WAIT = object()  # LineReader.readline on a non-blocking fd: no whole line there yet


class LineReader:
    """Line reads from a file descriptor, for one reader at a time (the sense worker's `Inbox`).

    Works for any input (pipe, socket, regular file, /dev/null). A line longer
    than `limit` raises ValueError once and is skipped up to its newline. On a
    non-blocking fd, `readline` answers `WAIT` when no whole line is there yet.
    """

    def __init__(self, fd: int, limit: int = MAX_LINE) -> None:
        self.fd = fd
        self.limit = limit
        self._buf = bytearray()
        self._skipping = False
        self._eof = False

    def has_line(self) -> bool:
        """A whole line is in the buffer already (read with the one before)."""
        return b"\n" in self._buf

    def readline(self) -> bytes | None | object:
        """The next line (with its newline, if it had one), None at end of input, or WAIT (a non-blocking fd)."""
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
            try:
                chunk = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return WAIT
            if not chunk:
                self._eof = True
                if buf and not self._skipping:  # a last line without its newline
                    line = bytes(buf)
                    buf.clear()
                    return line
                return None
            buf += chunk


class Inbox:
    """The kernel's lines for a sense worker's compute threads: each idle thread waits for the next line itself.

    The thread that takes a line runs its compute, so another must be reading meanwhile (a cancel, a peer's
    answer, another sense's compute). When the next reader waited for its turn on a lock, each line woke it as
    the line was taken: a GIL hand-off between two threads on the way to every compute (the hop, in a stamped
    copy: the first `stat` before BEGIN took 9 µs more in half the hops). Here every idle thread sleeps in an
    epoll of its own on the input fd with EPOLLEXCLUSIVE, so a line wakes one thread and the others sleep on;
    one lock keeps the buffer whole between them. A thread that leaves a whole line in the buffer (two read in
    one go) wakes one more through an eventfd. Where epoll cannot watch the input (a regular file, /dev/null)
    the threads take turns on the lock, reading blocking, as before.
    """

    def __init__(self, fd: int, limit: int) -> None:
        self.reader = LineReader(fd, limit)
        self.closed = False
        self._turn = threading.Lock()  # the one thread reading the buffer and the fd
        self._local = threading.local()
        self._wake = -1
        try:
            probe = select.epoll()
            try:
                probe.register(fd, select.EPOLLIN | select.EPOLLEXCLUSIVE)
            finally:
                probe.close()
            self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            os.set_blocking(fd, False)
        except (OSError, AttributeError):  # a file (EPERM), or a platform without EPOLLEXCLUSIVE or eventfd
            self.polled = False
        else:
            self.polled = True

    def take(self) -> bytes | None:
        """The next line, or None at the end of input or once closed; ValueError for a line over the limit
        (skipped)."""
        if not self.polled:
            with self._turn:
                line = None if self.closed else self.reader.readline()
            assert line is not WAIT  # (a blocking fd)
            return line  # type: ignore[return-value]
        poll = self._poll()
        while True:
            if self.closed:
                self._pass_on()
                return None
            woken = poll.poll()
            with self._turn:
                if self.closed:
                    continue
                if any(fd == self._wake for fd, _ in woken):  # (only then: a read of it costs a syscall)
                    try:
                        os.eventfd_read(self._wake)
                    except BlockingIOError:  # another thread read it first
                        pass
                line = self.reader.readline()
                if line is WAIT:  # another thread took it, or only part of a long line is there
                    continue
                if self.reader.has_line():
                    os.eventfd_write(self._wake, 1)
                return line  # type: ignore[return-value]

    def close(self) -> None:
        """Every thread waiting in `take` returns None (each wakes the next)."""
        self.closed = True
        self._pass_on()

    def _pass_on(self) -> None:
        if self._wake >= 0:
            os.eventfd_write(self._wake, 1)

    def _poll(self) -> select.epoll | select.poll:
        """This thread's epoll; where no fd is left for one (a group of many senses under a low limit), a poll
        object, which needs none and wakes every waiting thread (each then finds the line taken: correct, slower)."""
        poll = getattr(self._local, "poll", None)
        if poll is None:
            try:
                poll = select.epoll()
            except OSError:
                poll = select.poll()
                poll.register(self.reader.fd, select.POLLIN)
                poll.register(self._wake, select.POLLIN)
            else:
                poll.register(self.reader.fd, select.EPOLLIN | select.EPOLLEXCLUSIVE)
                poll.register(self._wake, select.EPOLLIN | select.EPOLLEXCLUSIVE)
            self._local.poll = poll
        return poll
