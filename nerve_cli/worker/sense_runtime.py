"""The sense worker: `python -m nerve_cli.worker sense --group G --home H [--senses a,b]`.

Loads the group's senses, says `Ready`, then answers every `Compute` with
exactly one `Signal`, `Silent` or `Error` (see `worker.compute` for the
transaction contract). Senses of the group run concurrently — async computes
as tasks on the loop, sync computes in a thread pool — but each sense runs one
compute at a time: a second `Compute` for a busy sense waits its turn.

`Cancel(id)` is the kernel's soft timeout. The compute is abandoned: an async
compute's task is cancelled, a sync compute's SQL is interrupted (a progress
handler checks the flag), and whatever it wrote is rolled back — even if its
code goes on to return a value. Its one answer is then `Error(TimeoutError)`,
sent when it has actually stopped (at once for a compute still waiting its
turn), so the kernel knows the sense is free; a cancel that loses the race to
the compute's own end changes nothing. Python code stuck in a thread cannot be
interrupted: no answer comes, and the kernel kills the worker at `grace_period`.

`Shutdown`, stdin EOF or SIGTERM: stop reading, answer queued computes with an
error, let running ones finish up to `engine.shutdown_timeout`, close, exit 0.
SIGINT is ignored: a terminal's Ctrl-C must not kill a worker mid-compute.

Without an `async def` sense the worker runs no event loop at all (asyncio is
never imported): its main thread waits for the stop, and cancels, shutdown and
the end of the drain are handled in the thread that hears of them. With one,
the loop runs the async computes, cancels and shutdown.

Threads: the compute threads themselves read the kernel's messages (the
protocol input fd; see `worker.stdio.Inbox`). Every idle thread waits for the
next line, a line wakes one of them, and for a sync compute that thread runs it
at once — no hop through the event loop, no executor queue and no hand-off to
another thread between the kernel's line and `BEGIN`. There is one thread per
sync sense plus one, started as needed, so someone is always waiting (a
`Cancel` is never stuck behind a compute). Async computes, cancels and
shutdown go to the event loop when there is one.
"""

from __future__ import annotations

import collections
import faulthandler
import functools
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from nerve_cli.errors import NerveError
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.states import JobState
from nerve_cli.wire import containment
from nerve_cli.wire.protocol import (
    LOG_PREFIX,
    MAX_LINE,
    Cancel,
    Compute,
    DatabaseCreated,
    DryRun,
    Error,
    ErrorInfo,
    Malformed,
    PeerRead,
    ReadPeer,
    Ready,
    Shutdown,
    Signal,
    Silent,
    decode,
)
from nerve_cli.wire.spec import GroupSpec
from nerve_cli.worker.capture import Capture, ComputeAwareFormatter, capturing, install_capture
from nerve_cli.worker.compute import Answer, Job, LoadedSense, async_lock, run_async, run_sync
from nerve_cli.worker.evidence import Evidence
from nerve_cli.worker.load import load_senses
from nerve_cli.worker.stdio import Inbox, ProtocolWriter, take_protocol_fds

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("nerve.worker")
DEFAULT_SHUTDOWN_TIMEOUT = 5.0


@dataclass
class _PeerWait:
    done: threading.Event
    error: str | None = None


class SenseRuntime:
    """Serves compute requests for the loaded senses of one group."""

    def __init__(self, group: str, senses: dict[str, LoadedSense], failed: dict[str, ErrorInfo],
                 out: ProtocolWriter, *, shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
                 unavailable: str | None = None, input_fd: int = 0) -> None:
        self.group = group
        self.senses = senses
        self.failed = failed
        self.out = out
        self.shutdown_timeout = shutdown_timeout
        self.unavailable = unavailable  # why nothing could load (e.g. nerve.yaml invalid)
        self.input_fd = input_fd  # the kernel's messages (never fd 0 in a real worker: see worker.stdio)
        self.jobs: dict[int, Job] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.loop: asyncio.AbstractEventLoop | None = None  # only when a sense is async
        self._call: Callable[..., None] = _call_here  # runs a callback where the runtime's state is kept
        self._stop: Callable[[], None] = _nothing
        self._set_idle: Callable[[], None] = _nothing
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # jobs, busy senses, thread counts, closed
        self._inbox: Inbox | None = None  # the kernel's messages, taken by whichever compute thread is idle
        self._busy: dict[str, collections.deque[Job]] = {}  # sync sense computing → its waiting jobs
        self._max_threads = max(2, sum(1 for s in senses.values() if not s.is_async) + 1)
        self._threads = 0
        self._followers = 0  # threads waiting for the kernel's next message
        self._closed = False
        self._peer_reads: dict[int, _PeerWait] = {}  # ReadPeer request number → the compute waiting for it
        self._next_read = 0
        for sense in senses.values():
            sense.peers.refresher = functools.partial(self._read_peer, sense.name)

    @property
    def needs_loop(self) -> bool:
        return any(sense.is_async for sense in self.senses.values())

    def serve(self) -> bool:
        """Run until shutdown without an event loop (no sense is async); True when every compute ended cleanly."""
        stopping, idle = threading.Event(), threading.Event()
        self._stop, self._set_idle = stopping.set, idle.set
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
        self._start_reading()
        stopping.wait()
        if self._refuse_waiting():
            idle.wait(self.shutdown_timeout)
        return self._abandon_stuck()

    async def serve_async(self) -> bool:
        """Run until shutdown with an event loop for the async computes; True when every compute ended cleanly."""
        import asyncio

        stopping, idle = asyncio.Event(), asyncio.Event()
        self.loop = loop = asyncio.get_running_loop()
        self._call, self._stop, self._set_idle = self._on_loop, stopping.set, idle.set
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
        self._start_reading()
        await stopping.wait()
        if self._refuse_waiting():
            try:
                await asyncio.wait_for(idle.wait(), self.shutdown_timeout)
            except asyncio.TimeoutError:
                pass
        return self._abandon_stuck()

    def _start_reading(self) -> None:
        self._inbox = Inbox(self.input_fd, MAX_LINE)
        with self._lock:
            self._threads += 1
        self._start_thread()

    # the threads ---------------------------------------------------------------
    def _start_thread(self) -> None:
        threading.Thread(target=self._follow, name="compute", daemon=True).start()

    def _follow(self) -> None:
        """Wait for the kernel's next message, handle it (a sync compute runs here); repeat."""
        assert self._inbox is not None
        while True:
            with self._lock:
                self._followers += 1
            try:
                line = self._inbox.take()
            except ValueError as exc:  # a line over the protocol limit
                log.error("dropped an oversized line from the kernel: %s", exc)
                line = b""
            with self._lock:
                self._followers -= 1
                if self._closed:
                    self._threads -= 1
                    return
            if line is None:  # EOF with no Shutdown read first: the kernel is gone
                containment.kernel_gone()
                self._close()
                continue
            if line.strip():
                self._dispatch(decode(line))

    def _close(self) -> None:
        with self._lock:
            self._closed = True
        if self._inbox is not None:
            self._inbox.close()  # the threads waiting for a message end
        self._call(self._stop)

    def _on_loop(self, fn: Any, *args: Any) -> None:
        assert self.loop is not None
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop has closed: the worker is exiting anyway

    def _dispatch(self, msg: Any) -> None:
        if isinstance(msg, Compute):
            self._start(msg)
        elif isinstance(msg, Cancel):
            self._call(self._cancel, msg.id)
        elif isinstance(msg, PeerRead):
            with self._lock:
                waiting = self._peer_reads.get(msg.request)
            if waiting is not None:
                waiting.error = msg.error
                waiting.done.set()
        elif isinstance(msg, Shutdown):
            self._close()
        elif isinstance(msg, Malformed):
            log.error("malformed line from the kernel (%s): %r", msg.problem, msg.line)
        else:
            log.error("unexpected message for a sense worker: %s", type(msg).__name__)

    def _start(self, msg: Compute) -> None:
        job = Job(msg.id, msg.sense, msg.reason, msg.sources, msg.filters, msg.bind, dry_run=msg.dry_run,
                  sample=msg.sample)
        sense = self.senses.get(job.sense)
        with self._lock:
            if job.id in self.jobs:
                log.error("compute id %s is already in progress; ignoring the duplicate", job.id)
                return
            if self._closed:
                refused = "the worker is shutting down; this compute was not started"
            else:
                refused = None
                self.jobs[job.id] = job
                if sense is not None and not sense.is_async:
                    waiting = self._busy.get(job.sense)
                    if waiting is not None:
                        job.waiting = True
                        waiting.append(job)  # one compute per sense at a time, in arrival order
                        return
                    self._busy[job.sense] = collections.deque()
                    grow = self._followers == 0 and self._threads < self._max_threads
                    if grow:
                        self._threads += 1
        if refused is not None:
            if job.start() and job.settle():
                self._answer(job, Answer(Outcome.ERROR, error=ErrorInfo("SenseError", refused)))
        elif sense is None:
            if job.start() and job.settle():
                self._answer(job, Answer(Outcome.ERROR, error=self._not_loaded(job.sense)))
            self._done(job)
        elif sense.is_async:
            self._call(self._start_async, sense, job)
        else:
            if grow:  # nobody else would read the kernel's messages while this compute runs
                self._start_thread()
            self._run_sync(sense, job)

    def _run_sync(self, sense: LoadedSense, job: Job | None) -> None:
        """Run `job`, then the jobs that queued up for the same sense meanwhile, in this thread."""
        while job is not None:
            try:
                # answered from this thread: no hop back through the loop before the kernel hears,
                # and after every line the compute printed
                with capturing(Capture(job.id, job.sense, self.out.send)):
                    outcome = run_sync(sense, job)
                self._answer(job, outcome)
            finally:
                self._done(job)
                with self._lock:
                    waiting = self._busy[sense.name]
                    job = waiting.popleft() if waiting else None
                    if job is not None:
                        job.waiting = False
                    else:
                        del self._busy[sense.name]

    def _read_peer(self, sense: str, peer: str, bind: dict[str, Any] | None) -> None:
        """From a compute of `sense`: ask the kernel to bring lazy `peer` up to date, and wait for it.

        The kernel's answer is read by a compute thread (there is always one reading), so this may block the
        calling thread, even the loop's for an async compute. A cancel (the compute's timeout) ends the wait.
        """
        with self._lock:
            self._next_read += 1
            request, waiting = self._next_read, _PeerWait(threading.Event())
            self._peer_reads[request] = waiting
            cancelled = self.senses[sense].peers.progress_handler
        try:
            self.out.send(ReadPeer(request, sense, peer, bind))
            while not waiting.done.wait(0.05):
                if cancelled is not None and cancelled():
                    raise TimeoutError(f"cancelled while lazy peer `{peer}` was being brought up to date")
                if self._closed:
                    raise NerveError(f"the worker is shutting down; lazy peer `{peer}` was not brought up to date")
        finally:
            with self._lock:
                self._peer_reads.pop(request, None)
        if waiting.error is not None:
            raise NerveError(f"lazy peer `{peer}` could not be brought up to date: {waiting.error}")

    def _done(self, job: Job) -> None:
        with self._lock:
            self.jobs.pop(job.id, None)
            idle = self._closed and not self.jobs
        if idle:
            self._call(self._set_idle)

    # the loop ------------------------------------------------------------------
    def _start_async(self, sense: LoadedSense, job: Job) -> None:
        import asyncio

        task = asyncio.ensure_future(self._run_async(sense, job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run_async(self, sense: LoadedSense, job: Job) -> None:
        lock = async_lock(sense)
        try:
            job.waiting = lock.locked()
            async with lock:  # one compute per sense at a time, in arrival order
                job.waiting = False
                with capturing(Capture(job.id, job.sense, self.out.send)):  # the compute's task inherits it
                    outcome = await run_async(sense, job)
                self._answer(job, outcome)
        finally:
            self._done(job)

    def _cancel(self, job_id: int) -> None:
        with self._lock:
            job = self.jobs.get(job_id)
        was = job.cancel() if job is not None else None
        if job is None or was is None:
            return  # unknown, or already settled: its own answer is (or was) sent
        if was is JobState.QUEUED:
            self._answer_cancelled(job, "was cancelled before it started")
        elif job.task is not None:
            job.task.cancel()  # an async compute stops at its next await

    def _answer_cancelled(self, job: Job, what: str) -> None:
        self._send(job, Error(job.id, job.sense, ErrorInfo(
            "TimeoutError", f"sense `{job.sense}` {what}; everything it wrote was rolled back"), job.elapsed_ms(),
            time.time()))

    def _send(self, job: Job, message: Signal | Silent | Error | DryRun) -> None:
        with self._send_lock:  # a compute thread and the loop (a cancel) may both try: one answer only
            if job.answered:
                return
            job.answered = True
        self.out.send(message)

    def _answer(self, job: Job, outcome: Answer) -> None:
        ms, ended = job.elapsed_ms(), time.time()  # its transaction has just ended: the kernel counts from here
        if job.dry_run and outcome.kind is not None:
            self._send(job, self._rehearsed(job, outcome, ms))
        elif outcome.kind is None:
            if job.started is not None:  # a queued job was answered when it was cancelled
                self._answer_cancelled(job, "was cancelled at its timeout and has now stopped")
        elif outcome.kind is Outcome.SIGNAL:
            self._send(job, Signal(job.id, job.sense, outcome.payload, outcome.ts, ms, outcome.workflow,
                                   outcome.signal_id, len(job.batch.events), job.batch.more, job.batch.restarted,
                                   job.batch.consumed(), list(outcome.emits), ended))
        elif outcome.kind is Outcome.SILENT:
            self._send(job, Silent(job.id, job.sense, ms, outcome.kept, len(job.batch.events), job.batch.more,
                                   job.batch.restarted, job.batch.consumed(), list(outcome.emits), ended))
        elif outcome.kind is Outcome.ERROR:
            assert outcome.error is not None
            self._send(job, Error(job.id, job.sense, outcome.error, ms, ended))

    def _rehearsed(self, job: Job, outcome: Answer, ms: float) -> DryRun:
        sense = self.senses.get(job.sense)
        blobs = (sense.rehearsal_blobs if sense is not None else None) or {}
        assert outcome.kind is not None
        cursors = {source: [before.last_id if (before := job.cursors_before.get(source)) else 0, to.last_id]
                   for source, to in job.batch.cursors.items()}
        return DryRun(job.id, job.sense, outcome.kind, ms, outcome.kept, outcome.payload, outcome.workflow,
                      outcome.error, outcome.writes or {}, cursors if outcome.kind is not Outcome.ERROR else {},
                      len(job.batch.events), dict(blobs), bool(sense is not None and sense.rehearsal_copy),
                      list(outcome.emits) if outcome.kind is not Outcome.ERROR else [])

    def _not_loaded(self, name: str) -> ErrorInfo:
        if name in self.failed:
            why = self.failed[name]
            return ErrorInfo(why.type, f"sense `{name}` failed to load: {why.message}", why.traceback, why.file, why.line)
        if self.unavailable:
            return ErrorInfo("SenseError", f"sense `{name}` cannot run: {self.unavailable}")
        loaded = ", ".join(sorted(self.senses)) or "none"
        return ErrorInfo("SenseError", f"sense `{name}` is not loaded in worker group `{self.group}` (loaded: {loaded})")

    def _refuse_waiting(self) -> bool:
        """The start of the drain: refuse what has not started; True while computes still run."""
        with self._lock:
            self._closed = True  # no thread reads another line; a compute arriving now is refused
            waiting = [job for job in self.jobs.values() if job.waiting]
        for job in waiting:  # behind another compute of their sense: they never start
            if job.cancel():
                self._send(job, Error(job.id, job.sense, ErrorInfo(
                    "SenseError", "the worker is shutting down; this compute was not started"), 0.0))
        with self._lock:
            return bool(self.jobs)

    def _abandon_stuck(self) -> bool:
        """The end of the drain: answer for computes still running; True when there were none."""
        with self._lock:
            stuck = [job for job in self.jobs.values() if job.state in (JobState.RUNNING, JobState.CANCELLED)]
        for job in stuck:
            job.cancel()
            self._send(job, Error(job.id, job.sense, ErrorInfo(
                "TimeoutError", f"still running {self.shutdown_timeout:g}s after shutdown; abandoned and rolled back"),
                job.elapsed_ms()))
        return not stuck

    def close(self) -> None:
        for sense in self.senses.values():
            try:
                sense.close()
            except Exception as exc:  # closing must not stop the others from closing
                log.error("closing sense %s: %s", sense.name, exc)


def main(args: Any) -> int:
    fds = take_protocol_fds()
    out = ProtocolWriter(fds.write)
    # a fatal signal (SIGSEGV, SIGABRT...) prints every thread's stack and names the crashing one: the
    # kernel reads from it which sense's code (or background thread) brought the worker down, and blames
    # only that sense; the calls that end the worker from Python say whose code made them (worker.evidence)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    Evidence(out.send, {fds.read, fds.write}).install()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_capture()  # a compute's prints (and its logging) are sent as Output lines under its name
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ComputeAwareFormatter(f"{LOG_PREFIX}{args.group} pid={os.getpid()}: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    runtime = _build(Path(args.home).resolve(), args.group, _names(args.senses), out, getattr(args, "spec", None),
                     dry_run=getattr(args, "dry_run", False))
    runtime.input_fd = fds.read
    for sense in runtime.senses.values():  # a database deleted under it is rebuilt, and the kernel told
        sense.on_rebuilt = lambda name, why: out.send(DatabaseCreated(name, why))
    out.send(Ready(os.getpid(), sorted(runtime.senses), runtime.failed,
                   sorted(n for n, s in runtime.senses.items() if s.takes_trigger),
                   sorted(n for n, s in runtime.senses.items() if s.created)))
    if runtime.needs_loop:
        import asyncio

        clean = asyncio.run(runtime.serve_async())
    else:
        clean = runtime.serve()
    if not clean:
        out.close()
        containment.end_descendants()
        os._exit(0)  # a compute thread is stuck in user code; its transaction dies with us
    runtime.close()
    out.close()
    return 0


def _call_here(fn: Callable[..., None], *args: Any) -> None:
    fn(*args)


def _nothing() -> None:
    pass


def _names(option: str | None) -> list[str]:
    return [n.strip() for n in (option or "").split(",") if n.strip()]


def _build(home: Path, group: str, only: list[str], out: ProtocolWriter, spec_json: str | None,
           dry_run: bool = False) -> SenseRuntime:
    if spec_json:
        return _build_from(home, group, GroupSpec.from_json(spec_json), out, dry_run)  # the caller's validated config
    # only without the kernel's spec: pydantic and ruamel stay out of every engine-spawned worker (~11 MiB each)
    from nerve_cli.config.load import load_config

    try:
        config = load_config(home)
    except NerveError as exc:
        log.error("cannot load nerve.yaml: %s", exc)
        info = ErrorInfo(type(exc).__name__, f"nerve.yaml is invalid: {exc}")
        return SenseRuntime(group, {}, {n: info for n in only}, out, unavailable=str(exc))
    known = [n for n in only if n in config.senses]
    runtime = _build_from(home, group, GroupSpec.from_config(config, group, known if only else None), out, dry_run)
    for name in only:
        if name not in config.senses:
            runtime.failed[name] = ErrorInfo("SenseError", f"sense `{name}` is not declared under senses: in nerve.yaml")
    return runtime


def _build_from(home: Path, group: str, spec, out: ProtocolWriter, dry_run: bool = False) -> SenseRuntime:
    loaded = load_senses(home, spec, dry_run=dry_run)
    for name, info in loaded.failed.items():
        log.error("sense %s failed to load: %s", name, info.summary())
    return SenseRuntime(group, loaded.senses, loaded.failed, out, shutdown_timeout=spec.shutdown_timeout)
