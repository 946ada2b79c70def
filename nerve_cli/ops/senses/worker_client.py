"""A blocking handle on one sense worker process, for callers that are not the kernel.

`nerve sense compute` (when no engine runs), the tests and the benchmark use it
to spawn a real worker and talk the real protocol. The kernel has its own
asyncio handle (`kernel.process`); this one is a plain `Popen` plus `select`.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.vocab.reasons import DEMAND, Reason
from nerve_cli.wire.process_group import kill_group
from nerve_cli.wire.protocol import (
    Compute,
    DryRun,
    Error,
    Malformed,
    Message,
    Output,
    PeerRead,
    ReadPeer,
    Ready,
    Shutdown,
    Signal,
    Silent,
    decode,
)

Answer = Signal | Silent | Error | DryRun


class WorkerGone(NerveError):
    """The worker exited (or closed its stdout) while we waited for it."""

    type = ErrorType.WORKER_GONE


def worker_argv(home: Path, group: str, senses: Iterable[str] | None = None, spec: str | None = None,
                dry_run: bool = False) -> list[str]:
    """The worker's command line; `spec` (GroupSpec JSON) spares it reading nerve.yaml again; `dry_run`: a worker
    that only rehearses (its databases are never written)."""
    argv = [sys.executable, "-m", "nerve_cli.worker", "sense", "--group", group, "--home", str(home)]
    if dry_run:
        argv.append("--dry-run")
    names = list(senses or [])
    if names:
        argv += ["--senses", ",".join(names)]
    if spec is not None:
        argv += ["--spec", spec]
    return argv


class SenseWorkerClient:
    """Spawn `python -m nerve_cli.worker sense …` and exchange protocol messages with it."""

    def __init__(self, home: Path, group: str, senses: Iterable[str] | None = None, *,
                 stderr: int | IO[Any] | None = None, env: dict[str, str] | None = None,
                 on_stderr: Callable[[str], None] | None = None, spec: str | None = None,
                 dry_run: bool = False, on_peer_read: Callable[[ReadPeer], str | None] | None = None) -> None:
        """`stderr` goes to Popen as is; or pass `on_stderr` to receive each stderr line (from a thread).
        `spec`: the group's settings as the kernel hands them over (GroupSpec JSON), when the caller has
        loaded nerve.yaml already. `dry_run`: a worker that only rehearses (its databases are never written).
        `on_peer_read` brings a lazy peer up to date for a compute (None, or why it could not)."""
        self.on_peer_read = on_peer_read
        self.argv = worker_argv(Path(home), group, senses, spec, dry_run)
        self.stderr = subprocess.PIPE if on_stderr is not None else stderr
        self.on_stderr = on_stderr
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready: Ready | None = None
        self._buf = bytearray()
        self._next_id = 0
        self._pump: threading.Thread | None = None
        self.outputs: dict[int, list[Output]] = {}  # what each compute printed, in order

    def __enter__(self) -> SenseWorkerClient:
        if self.proc is None:  # `with worker(...)` over a client already started must not start a second one
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> Ready:
        # its own process group, so whatever the sense starts can be killed with it (see _close_pipes)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=self.env, bufsize=0, process_group=0)
        if self.on_stderr is not None:
            self._pump = threading.Thread(target=self._pump_stderr, name="worker-stderr", daemon=True)
            self._pump.start()
        msg = self.read(timeout)
        if not isinstance(msg, Ready):
            self.kill()
            raise WorkerGone(f"the sense worker's first message was not `ready`: {msg!r}")
        self.ready = msg
        return msg

    def _pump_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None and self.on_stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self.on_stderr(raw.decode("utf-8", "replace"))

    # --- sending ----------------------------------------------------------

    def send(self, *messages: Message) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        for m in messages:
            if isinstance(m, Compute):  # keep next_id() clear of ids chosen by the caller
                self._next_id = max(self._next_id, m.id)
        try:
            self.proc.stdin.write(b"".join(m.encode() for m in messages))
        except BrokenPipeError as exc:
            raise WorkerGone(f"the sense worker (pid {self.proc.pid}) is gone: {self._exit_text()}") from exc

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # --- receiving --------------------------------------------------------

    def read(self, timeout: float | None = None) -> Message | Malformed:
        """The next protocol message; TimeoutError when none arrives in `timeout` seconds."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return decode(line)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError(f"no message from the sense worker within {timeout}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerGone(f"the sense worker (pid {self.proc.pid}) exited: {self._exit_text()}")
            self._buf += chunk

    def answer(self, compute_id: int, timeout: float | None = None) -> Answer:
        """Read until the answer to `compute_id`; Output lines are kept in `outputs`, other messages skipped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = self.read(left)
            if isinstance(msg, Output):
                self.outputs.setdefault(msg.id, []).append(msg)
            elif isinstance(msg, ReadPeer):  # the compute waits for its lazy peer: answered here, whatever happens
                why = self.on_peer_read(msg) if self.on_peer_read else "nothing here brings a lazy peer up to date"
                self.send(PeerRead(msg.request, why))
            elif isinstance(msg, (Signal, Silent, Error, DryRun)) and msg.id == compute_id:
                return msg

    def compute(self, sense: str, *, reason: Reason = DEMAND, timeout: float | None = 60.0) -> Answer:
        """Send one Compute and wait for its answer."""
        compute_id = self.next_id()
        self.send(Compute(compute_id, sense, reason))
        return self.answer(compute_id, timeout)

    # --- stopping ---------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> int | None:
        """Shutdown → wait → SIGTERM → wait → SIGKILL. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.send(Shutdown())
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except (WorkerGone, OSError):
                pass
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    self._signal(sig)
                try:
                    self.proc.wait(timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._close_pipes()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._signal(signal.SIGKILL)
            self.proc.wait()
        self._close_pipes()

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def _close_pipes(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            kill_group(self.proc.pid)
        if self._pump is not None and self.proc.poll() is not None:
            self._pump.join(2.0)  # deliver the last lines before the caller moves on
        for pipe in (self.proc.stdin, self.proc.stdout):  # stderr belongs to its pump thread, if any
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except OSError:
                    pass

    def _exit_text(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            return "closed its stdout but is still running"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"
