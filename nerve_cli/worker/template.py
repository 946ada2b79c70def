"""The warm template: a process that has imported the sense runtime and forks each new worker from itself.

`python -m nerve_cli.worker template --fd N` (the kernel starts it, in its own
session, with the instance folder as its working directory, like a worker). It
imports everything a sense worker imports before user code, freezes those
objects out of the garbage collector (so a worker's collections never write to
the pages it shares with the template and its siblings), says hello, then
serves start requests (see `wire.warm`) one at a time until the kernel closes
its end of the socket.

Each worker is forked with clone(CLONE_PARENT): it is the kernel's child, not
ours, exactly like a worker the kernel starts itself, so the kernel waits for
it, signals its process group and reads its exit status as it always did. In
the child, the fork returns out of the serve loop with its request: it takes
its own session, the three pipes as fds 0/1/2, the kernel's environment and
argv, and runs the ordinary worker entry point. Nothing the template holds
reaches it: the template has no thread, no open database, no event loop and no
user code, and checks the first before every fork.

Where this fork is not available (not Linux on x86-64 or arm64) the template
refuses every request, and the kernel starts workers plainly.
"""

from __future__ import annotations

import array
import ctypes
import gc
import importlib
import os
import platform
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

from nerve_cli.wire import warm

CLONE_PARENT = 0x00008000  # the child's parent is our parent: the kernel
SIGCHLD = 17  # the signal the kernel gets when the child exits, as for any fork
SYS_CLONE = {"x86_64": 56, "aarch64": 220}  # clone(2) numbers; the flags come first on both


@dataclass(frozen=True)
class Forked:
    """What a forked child takes out of the serve loop."""

    request: warm.StartRequest
    fds: tuple[int, int, int]


def main(args: Any, entry: Callable[[list[str]], int]) -> int:
    """Serve start requests; in each forked child, run `entry` (the worker command line) with its argv."""
    sock = socket.socket(fileno=args.fd)
    preload([m for m in getattr(args, "preload", "").split(",") if m])
    forked = serve(sock)
    if forked is None:
        return 0  # the kernel closed its end
    become_worker(forked)
    return entry(list(forked.request.argv))


def preload(modules: list[str] = []) -> None:  # noqa: B006 (read, never changed)
    """Import what every sense worker imports before user code, and `modules` (engine.preload: the senses' common
    imports), then keep the GC off those objects.

    The collector stays off while importing, so no collection leaves holes among the imported objects for a
    worker's own allocations to fill (a write to a page the template shares copies it); one collection and a
    freeze then put every object the template holds out of the collector's reach (a collection in a worker
    would otherwise write to each of them). (The import is here, not at the top: the template is the one
    process that wants it before it is asked.)
    """
    gc.disable()
    try:
        import nerve_cli.worker.sense_runtime  # noqa: F401

        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as exc:  # a user's module: whatever it raises, the template serves on
                print(f"nerve: engine.preload: could not import {name} ({type(exc).__name__}: {exc}); each "
                      "worker imports it itself, as a sense does", file=sys.stderr, flush=True)
                continue
            if threading.active_count() != 1:
                print(f"nerve: engine.preload: importing {name} started a thread, and a process with threads "
                      "cannot fork safely: workers start plainly; take it out of engine.preload",
                      file=sys.stderr, flush=True)
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()


def serve(sock: socket.socket) -> Forked | None:
    """Fork a worker per request; returns only in a forked child (its request) or when the kernel is gone."""
    fork = sibling_fork()
    if not _answer(sock, warm.hello(os.getpid())):
        return None  # the kernel stopped before the template was ready: nothing to serve
    space = socket.CMSG_SPACE(warm.WORKER_FDS * array.array("i").itemsize)
    while True:
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(warm.MAX_DATAGRAM, space, socket.MSG_CMSG_CLOEXEC)
        except OSError:  # the kernel is gone (reset): so are we, quietly
            return None
        if not data:
            return None
        fds = _fds(ancdata)
        why = _refusal(data, fds, fork)
        if why is not None:
            _close(fds)
            if not _answer(sock, warm.refused(why)):
                return None
            continue
        assert fork is not None
        try:
            pid = fork()
        except OSError as exc:
            _close(fds)
            if not _answer(sock, warm.refused(f"fork failed: {exc}")):
                return None
            continue
        if pid == 0:
            sock.close()
            return Forked(warm.StartRequest.decode(data), (fds[0], fds[1], fds[2]))
        _close(fds)
        if not _answer(sock, warm.started(pid)):
            return None  # the kernel is gone; the child it asked for reads EOF on its input and leaves


def _refusal(data: bytes, fds: list[int], fork: Any) -> str | None:
    if fork is None:
        return f"no sibling fork on {sys.platform}/{platform.machine()}"
    if len(fds) != warm.WORKER_FDS:
        return f"a start request carries {warm.WORKER_FDS} fds, not {len(fds)}"
    if threading.active_count() != 1:
        return "the template has threads: a fork would copy their locks mid-use"
    try:
        warm.StartRequest.decode(data)
    except ValueError as exc:
        return str(exc)
    return None


def become_worker(forked: Forked) -> None:
    """In the forked child: take the worker's session, pipes, environment and argv."""
    os.setsid()  # its own process group, as `start_new_session=True` gives a plain worker
    for target, fd in enumerate(forked.fds):
        os.dup2(fd, target)  # dup2 leaves 0/1/2 inheritable, as a plain start does
    _close([fd for fd in forked.fds if fd > 2])
    os.environ.clear()  # (and so no environ entry points into the area _retitle overwrites)
    os.environ.update(forked.request.env)
    sys.argv[1:] = forked.request.argv
    sys.orig_argv = [sys.executable, "-m", "nerve_cli.worker", *forked.request.argv]
    _retitle(sys.orig_argv)


def _retitle(argv: list[str]) -> None:
    """Show the worker's own command line in ps and /proc/PID/cmdline instead of the template's.

    The kernel reads a command line from the memory that held the original
    argv (and, once that is overwritten past its end, the environment strings
    after it), as setproctitle(3) relies on. NUL-separated when the arguments
    fit the original argv, space-separated beyond it (read as one string).
    """
    try:
        fields = open("/proc/self/stat", "rb").read().rsplit(b")", 1)[1].split()
        arg_start, arg_end, env_start, env_end = (int(fields[i]) for i in range(45, 49))
    except (OSError, IndexError, ValueError):
        return
    args = [a.encode("utf-8", "surrogateescape") for a in argv]
    exact = b"\0".join(args) + b"\0"
    if len(exact) <= arg_end - arg_start:
        title = exact.ljust(arg_end - arg_start, b"\0")
    else:
        room = (env_end if env_start == arg_end else arg_end) - arg_start
        title = b" ".join(args)[: room - 1] + b"\0"
    ctypes.memmove(arg_start, title, len(title))


def sibling_fork() -> Any:
    """A fork whose child is our parent's child (clone with CLONE_PARENT), or None where there is none.

    Done as os.fork does it (PyOS_BeforeFork, the call, PyOS_AfterFork_*), with
    the GIL held throughout (PyDLL), so the child's interpreter is set up for
    its one thread and its at-fork handlers run (random reseeds, for one).
    """
    number = SYS_CLONE.get(platform.machine())
    if not sys.platform.startswith("linux") or number is None:
        return None
    libc = ctypes.PyDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_void_p]
    api = ctypes.pythonapi

    def fork() -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        api.PyOS_BeforeFork()
        pid = syscall(number, CLONE_PARENT | SIGCHLD, None, None, None, None)
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0
        errno = ctypes.get_errno()
        api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(errno, os.strerror(errno))
        return pid

    return fork


def _answer(sock: socket.socket, reply: bytes) -> bool:
    try:
        sock.send(reply)
        return True
    except OSError:
        return False


def _fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return list(fds)


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
