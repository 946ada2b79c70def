"""How a worker process comes to be: a plain start, or a fork of the warm template.

`WorkerProcess.start` asks its launch for a subprocess transport; everything
after that (lines, exit, stop) is the same whichever launch made it.

- `PLAIN`: a fresh interpreter (`python -m nerve_cli.worker ...`), which
  imports the whole runtime before it can say ready.
- `WarmLaunch`: the engine keeps one template process (`worker/template.py`)
  that has imported the sense runtime; a start is a request on a socket, the
  template forks, and the child is the kernel's own child (clone with
  CLONE_PARENT) on three pipes the kernel made. Its exit is read through a
  pidfd and waitpid(pid), never a waitpid(-1). A worker the template cannot
  fork (template dead or not yet up, no pidfd, a working directory other than
  the template's, an environment whose start-up variables differ from the
  template's) starts plainly, so a warm launch never fails where a plain
  one would work. A template that dies is started again after a back-off;
  workers already forked from it are not affected (they are not its children).
"""

from __future__ import annotations

import array
import asyncio
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from nerve_cli.store import dbwatch
from nerve_cli.wire import warm

log = logging.getLogger(__name__)

WORKER_MODULE = "nerve_cli.worker"
TEMPLATE_READY_TIMEOUT = 30.0
RESTART_BACKOFF = (1.0, 60.0)  # seconds before a dead template is started again: first, most
ENV_SWITCH = "NERVE_WARM_WORKERS"  # "0": every worker starts plainly
# read once when a process starts (by the interpreter, the loader, the allocator): a fork keeps the template's
STARTUP_VARIABLES = ("PYTHON", "LD_", "MALLOC_", "GLIBC_TUNABLES")

ProtocolFactory = Callable[[], asyncio.SubprocessProtocol]


class Launch(Protocol):
    async def start(self, factory: ProtocolFactory, argv: Sequence[str], env: dict[str, str] | None,
                    cwd: str | None) -> asyncio.SubprocessTransport: ...


class PlainLaunch:
    """A fresh interpreter per worker, in its own session; `inherit`: fds every worker is given (at the same
    numbers: the engine's watch of its sense databases, `store.dbwatch`)."""

    def __init__(self, inherit: tuple[int, ...] = ()) -> None:
        self.inherit = inherit

    async def start(self, factory: ProtocolFactory, argv: Sequence[str], env: dict[str, str] | None,
                    cwd: str | None) -> asyncio.SubprocessTransport:
        transport, _ = await asyncio.get_running_loop().subprocess_exec(
            factory, *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, pass_fds=self.inherit,
            start_new_session=True,  # a terminal's Ctrl-C reaches the kernel only
        )
        return transport


PLAIN = PlainLaunch()


def warm_wanted() -> bool:
    """Whether this platform can fork warm workers at all (and nobody turned it off)."""
    return (os.environ.get(ENV_SWITCH, "1") != "0" and sys.platform.startswith("linux")
            and hasattr(os, "pidfd_open"))


def open_launch(stack: AsyncExitStack, cwd: Path, report: Callable[[str, str], None],
                preload: tuple[str, ...] = (), sense_data: Path | None = None) -> Launch:
    """How workers start: forked from a warm template where the platform allows (closed with `stack`), else
    plain starts. Either way each worker is given the engine's watch of `sense_data` (`store.dbwatch`: a
    sense worker is told when a name along its database's path comes or goes), the template's forks through it."""
    inherit = dbwatch.share(stack, sense_data, asyncio.get_running_loop()) if sense_data is not None else ()
    if not warm_wanted():
        return PlainLaunch(inherit) if inherit else PLAIN
    launch = WarmLaunch(cwd, report, preload, inherit)
    stack.push_async_callback(launch.close)
    return launch


class WarmLaunch:
    """Forks workers from one template process; falls back to `PLAIN` whenever it cannot."""

    def __init__(self, cwd: Path, report: Callable[[str, str], None], preload: tuple[str, ...] = (),
                 inherit: tuple[int, ...] = ()) -> None:
        self.cwd = str(cwd)
        self.inherit = inherit  # given to the template, so to every fork of it; and to every plain start
        self.plain = PlainLaunch(inherit) if inherit else PLAIN
        self.report = report
        self.preload = preload  # engine.preload: modules the template imports for every worker
        self.template_pid: int | None = None
        self.forked = 0  # workers started warm, for tests and the bench
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._up: asyncio.Future[bool] | None = None  # True once the template said hello
        self._lock = asyncio.Lock()  # one request on the socket at a time: replies come in order
        self._deaths = 0
        self._restart: asyncio.TimerHandle | None = None
        self._closed = False
        self._startup_env: dict[str, str] = {}  # the template's start-up variables

    # the template ---------------------------------------------------------------
    def open(self) -> None:
        """Start the template (in the background: the first starts wait for its hello)."""
        if self._closed or self._up is not None:
            return
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._startup_env = startup_variables(os.environ)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, "template", "--fd", str(theirs.fileno()),
                 *(["--preload", ",".join(self.preload)] if self.preload else [])],
                pass_fds=(theirs.fileno(), *self.inherit), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                cwd=self.cwd, start_new_session=True)
        except OSError as exc:
            ours.close()
            self.report("warn", f"could not start the warm worker template ({exc}); workers start plainly")
            self._up = loop.create_future()
            self._up.set_result(False)
            return
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._up = loop.create_future()
        loop.add_reader(ours.fileno(), self._hello)

    def _hello(self) -> None:
        sock = self._sock
        if sock is None:
            return
        asyncio.get_running_loop().remove_reader(sock.fileno())
        try:
            data = sock.recv(warm.MAX_DATAGRAM)
            self.template_pid = warm.read_reply(data, "hello") if data else None
        except (OSError, ValueError) as exc:
            log.warning("warm template said no hello: %s", exc)
            self.template_pid = None
        if self.template_pid is None:
            self._lost("it exited before it was ready")
            return
        assert self._up is not None
        if not self._up.done():
            self._up.set_result(True)

    async def _usable(self) -> bool:
        if self._closed:
            return False
        if self._up is None:
            self.open()
        assert self._up is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._up), TEMPLATE_READY_TIMEOUT)
        except asyncio.TimeoutError:
            self._lost(f"it was not ready after {TEMPLATE_READY_TIMEOUT:g}s")
            return False

    def _detach(self) -> subprocess.Popen[bytes] | None:
        """Forget the template: its socket closed and off the loop; its process returned to the caller."""
        proc, sock = self._proc, self._sock
        self._proc = self._sock = None
        if sock is not None:
            try:
                asyncio.get_running_loop().remove_reader(sock.fileno())
            except (ValueError, OSError):
                pass
            sock.close()
        return proc

    def _lost(self, why: str) -> None:
        """The template is gone (or useless): start workers plainly, and try a new one later."""
        proc = self._detach()
        if self._up is not None and not self._up.done():
            self._up.set_result(False)
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            reap_later(proc)
        if self._closed:
            return
        self._deaths += 1
        first, most = RESTART_BACKOFF
        delay = min(most, first * 2 ** (self._deaths - 1))
        who = f"warm worker template pid={self.template_pid}" if self.template_pid else "the warm worker template"
        self.report("warn", f"{who} {why}; workers start plainly, a new template in {delay:g}s")
        self.template_pid = None
        self._restart = asyncio.get_running_loop().call_later(delay, self._reopen)

    def _reopen(self) -> None:
        self._restart = None
        self._up = None
        self.open()

    async def close(self) -> None:
        """Stop the template (closing our end is its signal); workers forked from it live on."""
        self._closed = True
        if self._restart is not None:
            self._restart.cancel()
        if self._up is not None and not self._up.done():
            self._up.set_result(False)  # a start still waiting for the hello goes plain
        proc = self._detach()
        if proc is not None:
            for _ in range(100):  # it exits at once on EOF
                if proc.poll() is not None:
                    return
                await asyncio.sleep(0.01)
            proc.kill()
            reap_later(proc)

    # starts ----------------------------------------------------------------------
    async def start(self, factory: ProtocolFactory, argv: Sequence[str], env: dict[str, str] | None,
                    cwd: str | None) -> asyncio.SubprocessTransport:
        args = worker_args(argv)
        environment = dict(os.environ if env is None else env)
        if args is None or cwd != self.cwd or not await self._usable() \
                or startup_variables(environment) != self._startup_env:
            return await self.plain.start(factory, argv, env, cwd)
        request = warm.StartRequest(tuple(args), environment)
        stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        # one exchange on the socket is never cut in half (its reply would answer the next request):
        # a start cancelled meanwhile lets it finish, then discards the child
        exchange = asyncio.get_running_loop().create_task(self._fork(request, (stdin_r, out_w, err_w)))
        try:
            pid = await asyncio.shield(exchange)
        except BaseException as exc:
            for fd in (stdin_w, out_r, err_r):
                os.close(fd)  # a child forked all the same reads EOF and leaves; _discard reaps it
            if isinstance(exc, ValueError):  # the template would not: start this one plainly
                return await self.plain.start(factory, argv, env, cwd)
            exchange.add_done_callback(_discard)
            raise
        transport = ForkedTransport(pid, factory())
        await transport.connect(stdin_w, out_r, err_r)
        self.forked += 1
        return transport

    async def _fork(self, request: warm.StartRequest, fds: tuple[int, int, int]) -> int:
        """One request and its reply; ValueError when the template cannot fork it (it may be gone).
        The child's ends of its pipes are closed here once sent: the child has its copies."""
        loop = asyncio.get_running_loop()
        try:
            async with self._lock:
                return await self._exchange(loop, request, fds)
        finally:
            for fd in fds:
                os.close(fd)

    async def _exchange(self, loop: asyncio.AbstractEventLoop, request: warm.StartRequest,
                        fds: tuple[int, int, int]) -> int:
        sock = self._sock
        if sock is None:
            raise ValueError("no template")
        try:
            sock.sendmsg([request.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_ints(fds)))])
            reply = await loop.sock_recv(sock, warm.MAX_DATAGRAM)
        except OSError as exc:
            self._lost(f"could not be reached ({exc})")
            raise ValueError(str(exc)) from None
        if not reply:
            code = self._proc.poll() if self._proc is not None else None
            self._lost(f"exited ({'still running' if code is None else describe(code)})")
            raise ValueError("the template exited")
        try:
            return warm.read_reply(reply, "pid")
        except ValueError as exc:
            log.warning("the warm template did not fork: %s", exc)
            raise


def _discard(exchange: asyncio.Task[int]) -> None:
    """A child forked for a start that was cancelled: kill it and collect its exit."""
    if exchange.cancelled() or exchange.exception() is not None:
        return
    pid = exchange.result()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    reap_pid(pid)


def startup_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables a process reads only when it starts: a fork cannot take new values of these."""
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARIABLES)}


def worker_args(argv: Sequence[str]) -> list[str] | None:
    """What follows `python -m nerve_cli.worker` in argv, or None for any other command."""
    head = [sys.executable, "-m", WORKER_MODULE]
    return list(argv[3:]) if list(argv[:3]) == head else None


def describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def reap_later(proc: subprocess.Popen[bytes]) -> None:
    """Collect a Popen child's exit status when it comes, so it never lingers as a zombie."""
    if proc.poll() is None:
        _when_gone(proc.pid, proc.poll)


def reap_pid(pid: int) -> None:
    """The same for a child known only by its pid."""

    def reap() -> None:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

    _when_gone(pid, reap)


def _when_gone(pid: int, then: Callable[[], Any]) -> None:
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return

    def gone() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        then()

    loop.add_reader(pidfd, gone)


def _ints(fds: tuple[int, ...]) -> array.array[int]:
    return array.array("i", fds)


class _Pipe(asyncio.Protocol):
    """One of a forked worker's pipes, reporting to its transport."""

    def __init__(self, owner: ForkedTransport, fd: int) -> None:
        self.owner = owner
        self.fd = fd

    def data_received(self, data: bytes) -> None:
        self.owner.protocol.pipe_data_received(self.fd, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._pipe_lost(self.fd)


class ForkedTransport(asyncio.SubprocessTransport):
    """A subprocess transport for a worker the kernel did not exec itself, with asyncio's contract:
    `process_exited` when it exits, `connection_lost` once it has exited and its pipes are closed."""

    def __init__(self, pid: int, protocol: asyncio.SubprocessProtocol) -> None:
        super().__init__()
        self.pid = pid
        self.protocol = protocol
        self._returncode: int | None = None
        self._pipes: dict[int, asyncio.BaseTransport] = {}
        self._open: set[int] = set()
        self._pidfd: int | None = None
        self._finished = False

    async def connect(self, stdin_w: int, out_r: int, err_r: int) -> None:
        loop = asyncio.get_running_loop()
        for fd, raw in ((0, stdin_w), (1, out_r), (2, err_r)):
            self._open.add(fd)
            pipe: asyncio.BaseTransport
            if fd == 0:
                pipe, _ = await loop.connect_write_pipe(lambda: _Pipe(self, 0), os.fdopen(raw, "wb", buffering=0))
            else:
                pipe, _ = await loop.connect_read_pipe(functools.partial(_Pipe, self, fd),
                                                       os.fdopen(raw, "rb", buffering=0))
            self._pipes[fd] = pipe
        self._pidfd = os.pidfd_open(self.pid)
        loop.add_reader(self._pidfd, self._reap)
        self.protocol.connection_made(self)

    def _reap(self) -> None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: its status is lost (asyncio says 255 too)
            pid, code = self.pid, 255
        else:
            code = os.waitstatus_to_exitcode(status) if pid else 0
        if not pid:
            return  # not yet (the pidfd is readable only at exit: a spurious wake-up)
        self._stop_watching()
        self._returncode = code
        stdin = self._pipes.get(0)
        if stdin is not None:
            stdin.close()  # nothing can be written to a process that is gone
        self.protocol.process_exited()
        self._try_finish()

    def _stop_watching(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _pipe_lost(self, fd: int) -> None:
        self._open.discard(fd)
        self.protocol.pipe_connection_lost(fd, None)
        self._try_finish()

    def _try_finish(self) -> None:
        if self._returncode is None or self._open or self._finished:
            return
        self._finished = True
        self.protocol.connection_lost(None)

    # the asyncio.SubprocessTransport interface
    def get_pid(self) -> int:
        return self.pid

    def get_returncode(self) -> int | None:
        return self._returncode

    def get_pipe_transport(self, fd: int) -> Any:
        return self._pipes.get(fd)

    def send_signal(self, sig: int) -> None:
        if self._returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def is_closing(self) -> bool:
        return self._finished

    def close(self) -> None:
        for pipe in self._pipes.values():
            pipe.close()
        if self._returncode is None:  # as asyncio does: a transport closed on a live process kills it
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            # the pidfd reader stays: it reaps the child when it goes
