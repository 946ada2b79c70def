"""One engine per instance: an flock on data/nerve.lock that names its holder."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.home import Layout
from nerve_cli.store.sqlitefile import private_dir, storage_error


class EngineLocked(NerveError):
    """Another process already runs the engine (or a standalone writer) for this instance."""

    type = ErrorType.ENGINE_LOCKED


class InstanceLock:
    """Held for the life of the engine; the OS releases it if the process dies."""

    def __init__(self, home: Path, purpose: str = "nerve run") -> None:
        self.path = Layout(Path(home)).lock
        self.purpose = purpose
        self._fd: int | None = None

    def acquire(self) -> "InstanceLock":
        try:
            private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only filesystem, a folder that is not ours
            raise storage_error(self.path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise EngineLocked(
                f"an engine is already running for {self.path.parent.parent} ({holder}); "
                "stop it first, or talk to it with `nerve status`"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {self.purpose}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "InstanceLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
