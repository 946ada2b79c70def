"""Which sense's code does what in a sense worker, told to the kernel before it can matter.

The kernel blames a worker's death (or a breach of its limits) on a sense only
on evidence, never because that sense happened to be computing. The evidence a
worker can give:

- whose code each thread runs: a compute runs for its sense (`capture` marks
  it), code a sense runs at import runs for it (`acting_for`), and a thread
  inherits the sense of the code that started it (`threading.Thread.start` is
  wrapped here, and so is `_thread.start_new_thread` for raw threads). Each such background thread is announced
  (`ThreadOwner(ident, native_id, sense)`), so a crash in it (faulthandler
  names the crashing thread) or the CPU it burns can be put down to its sense;
  so is each process its code starts (`os.fork`, `subprocess.Popen`:
  `ChildOwner(pid, sense)`), for the memory and CPU it holds;
- what a sense's code did to the whole process: the Python calls that end it
  or cut it off from the kernel — `os._exit`, `os.abort`, `os.kill`/`os.killpg`
  of its own process (group), `signal.raise_signal`, and `os.close`,
  `os.closerange` or `os.dup2` over the protocol's fds — first send
  `Fatal(sense, what)`, then do what was asked.

Nothing is refused: a sense may still end its worker; the kernel then knows
whose doing it was. Calls made by Nerve itself (no sense's code on the thread)
send nothing.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nerve_cli.wire.protocol import ChildOwner, Fatal, Message, ThreadOwner
from nerve_cli.worker.capture import current_compute

_local = threading.local()  # .sense: the sense this thread runs for, outside a compute


def current_sense() -> str | None:
    """The sense whose code runs here: the compute's (its task or thread), else the thread's owner."""
    compute = current_compute()
    if compute is not None:
        return compute.sense
    return getattr(_local, "sense", None)


@contextmanager
def acting_for(sense: str) -> Iterator[None]:
    """Code run here (a sense's import) runs for `sense`: the threads it starts are that sense's."""
    before = getattr(_local, "sense", None)
    _local.sense = sense
    try:
        yield
    finally:
        _local.sense = before


class Evidence:
    """Installs the hooks above in this process; `send` writes a message to the kernel (thread-safe)."""

    def __init__(self, send: Callable[[Message], None], protocol_fds: set[int]) -> None:
        self.send = send
        self.protocol_fds = set(protocol_fds)

    def install(self) -> None:
        self._wrap_thread_start()
        self._wrap_raw_threads()
        self._wrap_children()
        self._wrap_exits()
        self._wrap_fd_calls()

    def fatal(self, what: str) -> None:
        """Tell the kernel the current sense's code is about to `what` (nothing when no sense's code runs)."""
        sense = current_sense()
        if sense is not None:
            try:
                self.send(Fatal(sense, what))
            except Exception:  # the pipe may be what is going away: never stop the call itself
                pass

    # threads ---------------------------------------------------------------------
    def _wrap_thread_start(self) -> None:
        original_start = threading.Thread.start
        evidence = self

        def start(thread: threading.Thread) -> None:
            owner = current_sense()
            if owner is not None:
                run = thread.run

                def run_for_owner() -> None:
                    _local.sense = owner
                    try:
                        evidence.send(ThreadOwner(threading.get_ident(), threading.get_native_id(), owner))
                    except Exception:  # a closed pipe: the thread still runs
                        pass
                    run()

                thread.run = run_for_owner  # type: ignore[method-assign]
            original_start(thread)

        threading.Thread.start = start  # type: ignore[method-assign, assignment]

    def _wrap_raw_threads(self) -> None:
        """A raw `_thread.start_new_thread` (threading keeps its own reference, so its threads are not seen twice)."""
        original = _thread.start_new_thread
        evidence = self

        def start_new_thread(function: Callable[..., Any], args: tuple, kwargs: dict | None = None) -> int:
            owner = current_sense()
            if owner is None:
                return original(function, args, *([kwargs] if kwargs is not None else []))

            def run_for_owner(*a: Any, **kw: Any) -> Any:
                _local.sense = owner
                try:
                    evidence.send(ThreadOwner(threading.get_ident(), threading.get_native_id(), owner))
                except Exception:  # a closed pipe: the thread still runs
                    pass
                return function(*a, **kw)

            return original(run_for_owner, args, *([kwargs] if kwargs is not None else []))

        _thread.start_new_thread = start_new_thread

    # processes -------------------------------------------------------------------------
    def _wrap_children(self) -> None:
        fork, popen_init = os.fork, subprocess.Popen.__init__
        evidence = self

        def _fork() -> int:
            pid = fork()
            if pid > 0:
                evidence.announce_child(pid)
            return pid

        def _popen_init(popen: subprocess.Popen, *args: Any, **kwargs: Any) -> None:
            popen_init(popen, *args, **kwargs)
            evidence.announce_child(popen.pid)

        os.fork = _fork
        subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign, assignment]

    def announce_child(self, pid: int) -> None:
        sense = current_sense()
        if sense is not None:
            try:
                self.send(ChildOwner(pid, sense))
            except Exception:  # a closed pipe: the child still runs
                pass

    # calls that end the process ----------------------------------------------------
    def _wrap_exits(self) -> None:
        exit_, abort, kill, killpg = os._exit, os.abort, os.kill, os.killpg
        raise_signal = signal.raise_signal

        def _exit(code: int) -> Any:
            self.fatal(f"called os._exit({code})")
            exit_(code)

        def _abort() -> Any:
            self.fatal("called os.abort()")
            abort()

        def _kill(pid: int, sig: int) -> None:
            if pid in (0, os.getpid()) and _ends(sig):
                self.fatal(f"sent its own worker {_name(sig)} (os.kill)")
            kill(pid, sig)

        def _killpg(pgid: int, sig: int) -> None:
            if pgid in (0, os.getpgid(0)) and _ends(sig):
                self.fatal(f"sent its worker's process group {_name(sig)} (os.killpg)")
            killpg(pgid, sig)

        def _raise_signal(sig: int) -> None:
            if _ends(sig):
                self.fatal(f"raised {_name(sig)} (signal.raise_signal)")
            raise_signal(sig)

        os._exit, os.abort, os.kill, os.killpg = _exit, _abort, _kill, _killpg  # type: ignore[assignment]
        signal.raise_signal = _raise_signal

    # calls that cut the worker off from the kernel --------------------------------------
    def _wrap_fd_calls(self) -> None:
        close, closerange, dup2 = os.close, os.closerange, os.dup2
        fds = self.protocol_fds

        def _close(fd: int) -> None:
            if fd in fds:
                self.fatal(f"closed the worker's protocol pipe (fd {fd}) with os.close")
            close(fd)

        def _closerange(low: int, high: int) -> None:
            hit = sorted(fd for fd in fds if low <= fd < high)
            if hit:
                self.fatal(f"closed the worker's protocol pipe (fd {', '.join(map(str, hit))}) "
                           f"with os.closerange({low}, {high})")
            closerange(low, high)

        def _dup2(fd: int, fd2: int, inheritable: bool = True) -> int:
            if fd2 in fds:
                self.fatal(f"replaced the worker's protocol pipe (fd {fd2}) with os.dup2({fd}, {fd2})")
            return dup2(fd, fd2, inheritable)

        os.close, os.closerange, os.dup2 = _close, _closerange, _dup2


_PR_SET_NAME = 15
_prctl: Any = None


def name_compute_thread(compute_id: int) -> None:
    """Name this OS thread after the compute it now runs (`kernel.supervision.oncpu` reads the name when a compute
    runs past its grace, to see whose code held the CPU); a no-op where prctl does not exist."""
    global _prctl
    if _prctl is None:
        import ctypes  # once, at the first sync compute

        try:
            # PyDLL: called holding the GIL (PR_SET_NAME neither blocks nor fails): a CDLL call lets go of it,
            # and on the hop another thread waiting for it then takes it before this compute has begun
            _prctl = ctypes.PyDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else False
        except (OSError, AttributeError):
            _prctl = False
    if _prctl:
        _prctl(_PR_SET_NAME, f"nerve:c{compute_id % 10 ** 8}".encode())


def _ends(sig: int) -> bool:
    """Whether `sig`, by default, ends the process (SIGKILL always; a handled one would not, but a sense that
    sends it to its own worker means it)."""
    return sig not in (0, signal.SIGCHLD, signal.SIGWINCH, signal.SIGURG, signal.SIGCONT)


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
