"""One worker child process: spawn it, send it messages, hear what it says, stop it.

The handle knows one child and nothing about policy (respawn, backoff, what a
message means): the supervisor decides that. Messages arrive through
`on_message`, in order, from a subprocess protocol that splits the stdout pipe
into lines; a malformed line arrives as `protocol.Malformed`, never an exception.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
import sys
from asyncio import unix_events
from typing import Callable, Sequence

from nerve_cli.kernel.supervision.launch import PLAIN, ForkedTransport, Launch
from nerve_cli.vocab.states import WorkerStart
from nerve_cli.wire import containment, protocol
from nerve_cli.wire.process_group import kill_group

log = logging.getLogger(__name__)

# asyncio reads pipes 256 KiB at a time and pays an mmap/munmap per read for
# small messages; 64 KiB halves the kernel<->worker round trip (LIBRARY-NOTES).
unix_events._UnixReadPipeTransport.max_size = 64 * 1024  # type: ignore[attr-defined]

STDERR_TAIL = 200  # enough for faulthandler's dump of every thread of a worker that crashed
PIPE_DRAIN = 0.5  # seconds to wait for a dead child's pipes to drain
OUTPUT_CLOSED_GRACE = 0.5  # a worker still alive this long after its protocol output closed is deaf


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, handle: "WorkerProcess") -> None:
        self.handle = handle
        self.buffers = {1: bytearray(), 2: bytearray()}
        self.skipping = {1: False, 2: False}  # inside a line over MAX_LINE: drop bytes up to its end

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        buf = self.buffers[fd]
        if self.skipping[fd]:
            end = data.find(b"\n")
            if end < 0:
                return
            self.skipping[fd] = False
            data = data[end + 1:]
        buf += data
        if len(buf) > protocol.MAX_LINE and b"\n" not in buf:
            # one report for the whole line, however long, and the next line read whole
            self.handle._line(fd, bytes(buf[:200]) + b"...(line too long)")
            buf.clear()
            self.skipping[fd] = True
            return
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            self.handle._line(fd, bytes(buf[start:end]))
            start = end + 1
        if start:
            del buf[:start]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.handle._output_closed()

    def process_exited(self) -> None:
        self.handle._process_gone()

    def connection_lost(self, exc: Exception | None) -> None:
        self.handle._exited()  # the process is gone and every pipe is drained


class WorkerProcess:
    """A handle on one worker child speaking the JSON-lines protocol."""

    def __init__(
        self,
        label: str,
        argv: Sequence[str],
        on_message: Callable[["WorkerProcess", protocol.Message | protocol.Malformed], None],
        on_stderr: Callable[["WorkerProcess", str], None] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        launch: Launch = PLAIN,
    ) -> None:
        self.label = label
        self.launch = launch
        self.argv = list(argv)
        self.on_message = on_message
        self.on_stderr = on_stderr
        self.env = env
        self.cwd = cwd
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        # called when the protocol output closed and the process lives on: it can tell the kernel nothing more
        self.on_output_closed: Callable[["WorkerProcess"], None] | None = None
        self.ready: protocol.Ready | None = None
        self.pid: int | None = None
        self.signalled: set[int] = set()  # the signals we sent it: a SIGKILL we did not send came from outside
        self.warm = False  # forked from the warm template rather than started as a fresh interpreter
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._exit = asyncio.get_running_loop().create_future()
        self._ready = asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        """Start the child (a fresh interpreter or a fork of the warm template: see `launch`)."""
        transport = await self.launch.start(lambda: _Protocol(self), self.argv, self.env, self.cwd)
        self._transport = transport
        self.warm = isinstance(transport, ForkedTransport)
        self._stdin = transport.get_pipe_transport(0)  # type: ignore[assignment]
        self.pid = transport.get_pid()

    async def wait_ready(self, timeout: float) -> protocol.Ready:
        """The worker's Ready, or raise: TimeoutError, or RuntimeError if it exited first."""
        done, _ = await asyncio.wait({self._ready, self._exit}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if self._ready in done:
            return self._ready.result()
        if self._exit in done:
            raise RuntimeError(f"worker {self.label} exited with {self.describe_exit()} before it was ready")
        raise TimeoutError(f"worker {self.label} was not ready after {timeout:.1f}s")

    @property
    def alive(self) -> bool:
        return self._transport is not None and not self._exit.done()

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    @property
    def start_kind(self) -> WorkerStart:
        return WorkerStart.WARM if self.warm else WorkerStart.PLAIN

    @property
    def killed_from_outside(self) -> bool:
        """Ended by a SIGKILL the kernel did not send: most likely a person or the OOM killer, so it is counted as
        nobody's (a sense's code sending it through libc looks the same: only the respawn back-off slows that)."""
        return self.returncode == -signal.SIGKILL and signal.SIGKILL not in self.signalled

    def describe_exit(self) -> str:
        code = self.returncode
        if code is None:
            return "no exit yet"
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def send(self, message: protocol.Message) -> bool:
        """Queue a message for the worker; False if it can no longer receive."""
        return self.send_line(message.encode())

    def send_line(self, line: bytes) -> bool:
        """Queue an encoded message (for a caller that had to measure it first)."""
        if not self.alive or self._stdin is None or self._stdin.is_closing():
            return False
        self._stdin.write(line)
        return True

    async def wait_exit(self, timeout: float | None = None) -> int | None:
        try:
            return await asyncio.wait_for(asyncio.shield(self._exit), timeout)
        except asyncio.TimeoutError:
            return None

    async def stop(self, timeout: float = 3.0) -> int | None:
        """Ask politely (shutdown), then TERM, then KILL."""
        if not self.alive:
            return self.returncode
        self.send(protocol.Shutdown())
        if self._stdin is not None:
            self._stdin.close()
        if (code := await self.wait_exit(timeout)) is not None:
            return code
        return await self.terminate(timeout)

    async def terminate(self, timeout: float = 2.0) -> int | None:
        """TERM → wait → KILL, for a worker that does not answer."""
        self.signal(signal.SIGTERM)
        if (code := await self.wait_exit(timeout)) is not None:
            return code
        self.signal(signal.SIGKILL)
        return await self.wait_exit(5.0)

    def signal(self, sig: int) -> None:
        if self.alive and self.pid:
            self.signalled.add(sig)
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    # called by _Protocol -------------------------------------------------
    def _line(self, fd: int, line: bytes) -> None:
        if fd == 2:
            text = line.decode("utf-8", "replace")
            self.stderr_tail.append(text)
            if self.on_stderr:
                self.on_stderr(self, text)
            return
        if not line.strip():
            return
        message = protocol.decode(line)
        if isinstance(message, protocol.Ready) and not self._ready.done():
            self.ready = message
            self._ready.set_result(message)
        self.on_message(self, message)

    def _output_closed(self) -> None:
        """The worker's protocol output closed: normal as it exits; if it lives on, it has gone deaf."""
        if self._exit.done() or self.on_output_closed is None:
            return
        asyncio.get_running_loop().call_later(OUTPUT_CLOSED_GRACE, self._still_alive_without_output)

    def _still_alive_without_output(self) -> None:
        if self.alive and self.on_output_closed is not None:
            self.on_output_closed(self)

    def _process_gone(self) -> None:
        kill_group(self.pid)
        containment.end_worker(self.pid)  # its setsid children and daemons too, where it has a cgroup
        # Its last lines may still be in the pipe: wait for the pipes to close, unless a
        # grandchild holds them open, in which case give up after a short while.
        asyncio.get_running_loop().call_later(PIPE_DRAIN, self._exited)

    def _exited(self) -> None:
        containment.remove_worker(self.pid)  # its cgroup, now that what was killed in it has had time to die
        if self._transport is not None and not self._exit.done():
            self._exit.set_result(self._transport.get_returncode())
            self._transport.close()


def start_worker(
    label: str,
    argv: Sequence[str],
    on_message: Callable[[WorkerProcess, protocol.Message | protocol.Malformed], None],
    on_stderr: Callable[[WorkerProcess, str], None] | None = None,
    cwd: str | None = None,
    launch: Launch = PLAIN,
) -> WorkerProcess:
    """The one place the kernel makes a worker's handle (sense groups and workflows alike); `start()` on it
    starts the process the way `launch` says (a fresh interpreter, or a fork of the warm template)."""
    return WorkerProcess(label, argv, on_message, on_stderr, cwd=cwd, launch=launch)


def worker_argv(*args: str) -> list[str]:
    """`python -m nerve_cli.worker ...` with this interpreter."""
    return [sys.executable, "-m", "nerve_cli.worker", *args]
