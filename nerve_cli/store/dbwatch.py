"""Whether any sense's database file may have been deleted or replaced, told by the engine to its workers.

Before each compute's BEGIN and after its COMMIT, a sense worker checks that the file at its database's path
is still the one it writes (`LoadedSense.db_replaced`: "delete NAME.db and it is rebuilt"). Two `stat` calls,
one for the file and one for its -wal, cost about 3.6 µs. A hop pays them twice on its critical path: the
signalling worker after its COMMIT, and the listening worker before its BEGIN.

The engine instead keeps one inotify instance that watches data/senses and every folder above it for names
coming and going. It shares that instance with its sense workers, as an inherited fd they only poll and never
read, together with a sequence number in shared memory (a memfd):

- **The kernel.** When the instance has events, it makes the number odd, reads every event, and makes the
  number even again. When a watch is lost (a watched folder was deleted or moved), it leaves the number odd
  for good.
- **A worker.** `WatchReader.quiet()` first asks epoll whether an event is queued. If none is, and *then* the
  number reads even, it returns that number; otherwise it returns -1. Suppose a sense's last full check (the
  stats) saw the same even number. Then no name along its path has changed since, and its file is the one it
  checked. Any other answer means the full check.

**Why it is exact.** inotify queues an event before the unlink or rename that caused it returns. So a change
made before `quiet()` is either still queued, and epoll reports it, or it has been drained, and the kernel
made the number odd before draining it. The epoll comes before the number's read for that reason.

**One instance per engine, not per worker.** inotify instances are few per user (128 by default), and every
program that watches files shares them.

**What `stat` would catch and this does not:** something mounted over a folder of the path while the engine
runs. A path through a symlink is not watched at all, so it gets the full check every time.
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import sys
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

ENV = "NERVE_DB_WATCH"  # "INOTIFY_FD SEQUENCE_FD FOLDER": what a sense worker attaches to (`attached`)
_SEQUENCE_NAME = "nerve-dbwatch"

IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_IGNORED, IN_ONLYDIR = 0x400, 0x800, 0x2000, 0x8000, 0x01000000
# a name coming or going in a watched folder, or the folder itself going
_MASK = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
# after one of these, a watch no longer follows the path: the number stays odd
_LOST = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


class DbWatch:
    """The engine's side: the inotify instance, the shared number, and its drain on the engine's loop."""

    def __init__(self, folder: str, inotify_fd: int, sequence_fd: int) -> None:
        self.folder = folder
        self.inotify_fd = inotify_fd
        self.sequence_fd = sequence_fd
        self._map = mmap.mmap(sequence_fd, 8)
        self._sequence = memoryview(self._map).cast("Q")
        self.lost = False  # a watch no longer follows the path: every check is the full one from now on
        self._loop: Any = None

    @classmethod
    def open(cls, folder: Path) -> DbWatch | None:
        """A watch of `folder` and each folder above it, or None where there can be none (not Linux, no
        inotify instance or watch left, a path through a symlink): the workers then always stat."""
        path = os.path.abspath(folder)
        if not sys.platform.startswith("linux") or not hasattr(os, "memfd_create") \
                or os.path.realpath(path) != path:
            return None
        import ctypes  # here: a worker never opens a watch, only its reader

        libc = ctypes.CDLL(None, use_errno=True)
        with ExitStack() as undo:
            inotify_fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if inotify_fd < 0:
                return None
            undo.callback(os.close, inotify_fd)
            at = path
            while True:
                if libc.inotify_add_watch(inotify_fd, at.encode(), _MASK) < 0:
                    return None
                above = os.path.dirname(at)
                if above == at:
                    break
                at = above
            try:
                sequence_fd = os.memfd_create(_SEQUENCE_NAME, os.MFD_CLOEXEC)
            except OSError:
                return None
            undo.callback(os.close, sequence_fd)
            os.ftruncate(sequence_fd, 8)
            watch = cls(path, inotify_fd, sequence_fd)
            undo.pop_all()
            return watch
        return None  # (not reached: for the type checker)

    @property
    def fds(self) -> tuple[int, int]:
        """What every sense worker inherits."""
        return self.inotify_fd, self.sequence_fd

    def environ(self) -> str:
        return f"{self.inotify_fd} {self.sequence_fd} {self.folder}"

    def start(self, loop: Any) -> None:
        self._loop = loop
        loop.add_reader(self.inotify_fd, self.drain)

    def drain(self) -> None:
        """Odd while the events are read; even again after, unless a watch was lost."""
        sequence = self._sequence[0]
        if not sequence & 1:
            self._sequence[0] = sequence + 1
        while True:
            try:
                data = os.read(self.inotify_fd, 65536)
            except BlockingIOError:
                break
            self.lost = self.lost or _loses_a_watch(data)
        if not self.lost:
            self._sequence[0] += 1

    @property
    def sequence(self) -> int:
        return self._sequence[0]

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.inotify_fd)
            self._loop = None
        self._sequence.release()
        self._map.close()
        os.close(self.inotify_fd)
        os.close(self.sequence_fd)


def _loses_a_watch(data: bytes) -> bool:
    at = 0
    while at + _EVENT.size <= len(data):
        _, mask, _, length = _EVENT.unpack_from(data, at)
        if mask & _LOST:
            return True
        at += _EVENT.size + length
    return False


def share(stack: AsyncExitStack | ExitStack, folder: Path, loop: Any) -> tuple[int, ...]:
    """At an engine's start: watch `folder` (made if missing) for the workers, named in the environment they
    inherit, until `stack` closes; the fds every worker's start must pass on (none when there is no watch)."""
    folder.mkdir(parents=True, exist_ok=True)
    watch = DbWatch.open(folder)
    if watch is None:
        os.environ.pop(ENV, None)
        return ()
    watch.start(loop)
    os.environ[ENV] = watch.environ()
    stack.callback(watch.close)
    stack.callback(lambda: os.environ.pop(ENV, None) if os.environ.get(ENV) == watch.environ() else None)
    return watch.fds


class WatchReader:
    """A worker's side: `quiet()`, about a quarter of a microsecond."""

    def __init__(self, inotify_fd: int, sequence_fd: int, folder: str) -> None:
        self.folder = folder
        self._epoll = select.epoll()  # (not select.poll: one poll object refuses two threads at once)
        self._epoll.register(inotify_fd, select.EPOLLIN)
        self._map = mmap.mmap(sequence_fd, 8, prot=mmap.PROT_READ)
        self._sequence = memoryview(self._map).cast("Q")

    def quiet(self) -> int:
        """The shared number when no event is pending and none is being read, else -1."""
        if self._epoll.poll(0):
            return -1
        sequence = self._sequence[0]
        return -1 if sequence & 1 else sequence

    def covers(self, db_path: str) -> bool:
        return os.path.dirname(db_path) == self.folder


_attached: tuple[int, WatchReader | None] | None = None  # (pid, reader): made once per process


def attached() -> WatchReader | None:
    """This worker's reader of the engine's watch, or None (no engine's watch here: every check stats)."""
    global _attached
    if _attached is not None and _attached[0] == os.getpid():
        return _attached[1]
    _attached = (os.getpid(), _attach(os.environ.get(ENV, "")))
    return _attached[1]


def _attach(spec: str) -> WatchReader | None:
    named = _named(spec)
    if named is None:
        return None
    try:
        return WatchReader(*named)
    except (OSError, ValueError):
        return None


def seal() -> None:
    """At a worker's start, before any user code: the watch's fds are not given to the processes that code
    starts (one reading the inotify instance would take events from every worker)."""
    named = _named(os.environ.get(ENV, ""))
    for fd in named[:2] if named is not None else ():
        os.set_inheritable(fd, False)


def _named(spec: str) -> tuple[int, int, str] | None:
    """The fds and folder the environment names, when the fds are the watch's: the environment outlives them
    in a process the engine did not start as a worker."""
    parts = spec.split(" ", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    inotify_fd, sequence_fd = int(parts[0]), int(parts[1])
    try:
        if os.readlink(f"/proc/self/fd/{inotify_fd}") != "anon_inode:inotify" \
                or not os.readlink(f"/proc/self/fd/{sequence_fd}").startswith(f"/memfd:{_SEQUENCE_NAME}"):
            return None
    except OSError:
        return None
    return inotify_fd, sequence_fd, parts[2]
