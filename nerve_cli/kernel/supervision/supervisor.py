"""Keep one sense group's worker alive and run computes on it.

The supervisor acts, the `policy.Policy` says how long, the child lives in
`process.WorkerProcess`: respawn with exponential back-off when the worker
dies (a worker that keeps dying at start is backed off, not spun), the soft
timeout (cancel, discard the result) and the grace period (kill the whole
group worker and respawn it). Everything the engine must record or route goes
out through `GroupHooks`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Protocol

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.supervision.crash_site import crash_site
from nerve_cli.kernel.supervision.launch import PLAIN, Launch
from nerve_cli.kernel.supervision.oncpu import Threads, grace_culprit, threads_of
from nerve_cli.kernel.supervision.penalty import Blame
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.process import WorkerProcess, start_worker, worker_argv
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.vocab.reasons import Reason
from nerve_cli.vocab.states import WorkerState
from nerve_cli.wire import protocol
from nerve_cli.wire.spec import GroupSpec

FATAL_FRESH = 30.0  # seconds a sense's fatal call (os._exit, closing the pipe...) explains a death that follows
MAX_OWNERS = 10_000  # background threads remembered per worker


@dataclass
class Inflight:
    id: int
    sense: str
    reason: Reason
    started: float
    deadline: float = float("inf")  # loop time of the soft timeout
    timeout: float = 0.0
    cancelled: bool = False
    handles: list[asyncio.TimerHandle] = field(default_factory=list)
    threads_at_timeout: tuple[float, Threads] | None = None  # (loop time, the worker's threads' CPU) at the timeout

    def disarm(self) -> None:
        for handle in self.handles:
            handle.cancel()


class GroupHooks(Protocol):
    def compute_answered(self, group: str, inflight: Inflight, message: protocol.Message) -> None: ...
    def worker_died(self, group: str, computing: frozenset[str], evidence: Blame | None, why: str,
                    counted: bool) -> Blame | None: ...
    def compute_lost(self, group: str, inflight: Inflight, why: str, blame: Blame | None) -> None: ...
    def compute_output(self, group: str, message: protocol.Output) -> None: ...
    def compute_timed_out(self, group: str, inflight: Inflight, timeout: float) -> None: ...
    def group_event(self, group: str, row: LogRow) -> None:
        """A worker's life event, for the log (and the console)."""
    def worker_stderr(self, group: str, pid: int | None, line: str) -> None: ...
    def sense_load_failed(self, group: str, sense: str, info: protocol.ErrorInfo) -> None: ...
    def group_runnable(self, group: str, senses: set[str]) -> None:
        """These senses became able, or unable, to take computes here (see `runnable`)."""
    def group_ready(self, group: str) -> None: ...
    def database_created(self, group: str, sense: str, why: str) -> None:
        """A sense's database was made empty (missing at start, or deleted while its worker ran)."""
    def peer_read(self, group: str, message: protocol.ReadPeer) -> Awaitable[str | None]:
        """Bring a lazy peer up to date for a compute of this group; resolves to None, or why it could not."""


class GroupSupervisor:
    """One group: its worker, its in-flight computes, its restart policy."""

    def __init__(self, group: str, senses: list[str], home: Path, config: NerveConfig, hooks: GroupHooks,
                 clock: Callable[[], float] = time.time, launch: Launch = PLAIN) -> None:
        self.group = group
        self.launch = launch
        self.senses = list(senses)
        self.home = home
        self.config = config
        self.hooks = hooks
        self.clock = clock
        self._state = WorkerState.STOPPED
        self._published: frozenset[str] = frozenset()
        self.worker: WorkerProcess | None = None
        self.inflight: dict[int, Inflight] = {}
        self.loaded: set[str] = set()
        self.takers: set[str] = set()  # loaded senses whose compute takes `trigger` (receives events)
        self.failed: dict[str, protocol.ErrorInfo] = {}
        self.failed_since: dict[str, float] = {}  # sense → when it first failed to load (kept across respawns)
        self.restarts = 0
        self.failures = 0
        self.next_retry: float | None = None
        self.started_at: float | None = None
        self.last_exit: str | None = None
        self._stopping = False
        self._respawn: asyncio.TimerHandle | None = None
        self._spawning: asyncio.Task | None = None
        # one timer for the earliest soft timeout of the group, not one per compute: a compute that
        # ends in time costs no timer at all, and a late timer just finds nothing due and re-arms
        self._deadlines: asyncio.TimerHandle | None = None
        self._deadlines_at = float("inf")
        self._retiring: set[asyncio.Task[int | None]] = set()  # old workers shutting down after a reload
        self._kill_evidence: Blame | None = None  # why we are killing the worker, when one sense is the reason
        self._breach_kill = False  # we are killing it for a broken limit nobody could be named for (counted there)
        # what the worker told about its senses' code (worker.evidence): whose each background thread is,
        # and the last call a sense's code made that ends the worker or cuts it off (with when, monotonic)
        self.owners: dict[int, tuple[int, str]] = {}  # thread ident → (native thread id, sense)
        self.children: dict[int, str] = {}  # pid of a process a sense's code started → that sense
        self._fatal: tuple[float, Blame] | None = None

    @property
    def policy(self) -> Policy:
        """Back-off, waits and limits, from the current config (a reload changes them)."""
        return Policy.of(self.config.engine)

    @property
    def state(self) -> WorkerState:
        return self._state

    @state.setter
    def state(self, value: WorkerState) -> None:
        self._state = value
        self._publish()

    def _publish(self) -> None:
        """Say which senses changed between runnable and not, so the engine never asks every group per event."""
        now = frozenset(self.runnable())
        if now != self._published:
            changed, self._published = now ^ self._published, now
            self.hooks.group_runnable(self.group, set(changed))

    # lifecycle -------------------------------------------------------------
    def start(self) -> None:
        self._stopping = False
        self._spawn_soon(0.0)

    def _spawn_soon(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        if delay <= 0:
            self._spawning = loop.create_task(self._spawn())
            return
        self.state = WorkerState.BACKOFF
        self.next_retry = self.clock() + delay
        self._respawn = loop.call_later(delay, lambda: setattr(self, "_spawning", loop.create_task(self._spawn())))

    async def _spawn(self) -> None:
        if self._stopping:
            return
        self.state, self.next_retry = WorkerState.STARTING, None
        spec = GroupSpec.from_config(self.config, self.group, self.senses).to_json()
        argv = worker_argv("sense", "--group", self.group, "--home", str(self.home),
                           "--senses", ",".join(self.senses), "--spec", spec)
        worker = start_worker(f"group={self.group}", argv, self._on_message, self._on_stderr, cwd=str(self.home),
                              launch=self.launch)
        worker.on_output_closed = self._output_closed
        self.worker = worker
        self.owners, self.children, self._fatal = {}, {}, None
        try:
            await worker.start()
            self.started_at = self.clock()
            ready = await worker.wait_ready(self.policy.ready_timeout)
        except (OSError, RuntimeError, TimeoutError) as exc:
            await worker.terminate(self.policy.term_wait)
            self._died(worker, str(exc))
            return
        asyncio.get_running_loop().create_task(self._watch(worker))
        if self._stopping:
            return
        self.loaded, self.failed = set(ready.senses), dict(ready.failed)
        now = self.clock()
        self.failed_since = {s: self.failed_since.get(s, now) for s in self.failed}
        self.takers = set(ready.takes_trigger)
        self.state = WorkerState.READY
        self.hooks.group_event(self.group, logrows.worker_started(
            self.group, worker.pid, senses=sorted(self.loaded), restarts=self.restarts, start=worker.start_kind,
            failed={k: v.summary() for k, v in self.failed.items()}))
        for sense, info in self.failed.items():
            self.hooks.sense_load_failed(self.group, sense, info)
        for sense in ready.created:
            self.hooks.database_created(self.group, sense, "its database file was missing when its worker started")
        self.hooks.group_ready(self.group)

    async def _watch(self, worker: WorkerProcess) -> None:
        await worker.wait_exit()
        if worker is self.worker:
            self._died(worker, f"exited with {worker.describe_exit()}")

    def _died(self, worker: WorkerProcess, why: str) -> None:
        if worker is not self.worker:
            return
        self.worker = None
        self.last_exit = why
        lived = self.clock() - (self.started_at or self.clock())
        lost = list(self.inflight.values())
        self.inflight.clear()
        self.loaded = set()
        self._publish()  # before the lost computes are reported: nothing may be sent here meanwhile
        evidence, self._kill_evidence = self._evidence(worker), None
        counted, self._breach_kill = self._breach_kill or worker.killed_from_outside, False
        # a worker we stopped on purpose is nobody's fault
        computing = frozenset() if self._stopping else frozenset(i.sense for i in lost)
        blame = None if self._stopping else self.hooks.worker_died(self.group, computing, evidence, why, counted)
        for inflight in lost:
            inflight.disarm()
            self.hooks.compute_lost(self.group, inflight, f"worker {why}", blame)
        if self._stopping:
            self.state = WorkerState.STOPPED
            return
        self.failures = self.policy.failures_after(self.failures, lived)
        delay = self.policy.backoff(max(1, self.failures))
        self.restarts += 1
        self.hooks.group_event(self.group, logrows.worker_exited(
            self.group, worker.pid, why=why, code=worker.returncode, respawn_in=delay,
            computing=[i.sense for i in lost], stderr=list(worker.stderr_tail)[-10:],
            blamed=None if blame is None else {"sense": blame.sense, "because": blame.because}))
        self._spawn_soon(delay)

    def _evidence(self, worker: WorkerProcess) -> Blame | None:
        """The sense whose code killed the worker, when it shows; None when nothing says (never the sense that
        merely computed): its code on the crashing thread, a thread its code started crashed it, its code
        called what ends or deafens the worker (a recent `Fatal`), or we killed the worker for it."""
        site = crash_site(worker.stderr_tail, self.home)
        if site is not None and site.sense is not None:
            return Blame(site.sense, f"its code was on the crashing thread ({site.where})", site.file, site.line)
        if site is not None and site.thread is not None and site.thread in self.owners:
            owner = self.owners[site.thread][1]
            return Blame(owner, f"a thread its code started crashed the worker (thread 0x{site.thread:x})")
        if self._fatal is not None and time.monotonic() - self._fatal[0] < FATAL_FRESH:
            return self._fatal[1]
        return self._kill_evidence

    def _output_closed(self, worker: WorkerProcess) -> None:
        """The worker lives but its protocol output closed (user code closed or overwrote the fd): it can
        answer nothing, so it is replaced now rather than after every compute's timeout and grace."""
        if worker is not self.worker or self._stopping:
            return
        culprit = self._fatal[1].sense if self._fatal is not None else ""
        self.hooks.group_event(self.group, logrows.worker_killed(
            self.group, worker.pid, culprit,
            "its protocol output closed while it ran, so it can answer nothing more"
            + (f" ({self._fatal[1].because})" if self._fatal is not None else "")))
        asyncio.get_running_loop().create_task(worker.terminate(self.policy.term_wait))

    async def stop(self, timeout: float) -> None:
        """Let in-flight computes finish up to `timeout`, then shut the worker down."""
        deadline = await self._quiesce(timeout)
        worker = self.worker
        if worker is not None:
            await worker.stop(timeout=max(0.5, deadline - time.monotonic()))
            self._died(worker, f"stopped ({worker.describe_exit()})")
        if self._retiring:  # a predecessor still shutting down after a reload
            await asyncio.gather(*self._retiring, return_exceptions=True)
        if self._spawning and not self._spawning.done():
            self._spawning.cancel()
        self.state = WorkerState.STOPPED

    async def _quiesce(self, timeout: float) -> float:
        """Take no new computes and wait up to `timeout` for the running ones; returns the deadline."""
        self._stopping = True
        self._publish()
        if self._respawn:
            self._respawn.cancel()
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return deadline

    async def restart(self, senses: list[str] | None = None, config: NerveConfig | None = None) -> None:
        """Reload: take no new computes, let running ones finish (bounded by their grace), respawn.

        Waiting keeps a compute that was running when its file changed whole:
        its result is recorded before the old worker goes. The old worker then
        shuts down while its successor starts: with nothing left to compute,
        the new code need not wait for the old process to exit.
        """
        self.state = WorkerState.RELOADING
        limit = max((self._deadline(i.sense) for i in self.inflight.values()), default=0.0)
        deadline = await self._quiesce(limit)
        worker = self.worker
        if worker is not None:
            self._died(worker, "stopped for a reload")  # a compute still running past its grace is lost here
            retiring = asyncio.get_running_loop().create_task(worker.stop(timeout=max(0.5, deadline - time.monotonic())))
            self._retiring.add(retiring)
            retiring.add_done_callback(self._retiring.discard)
        if self._spawning and not self._spawning.done():
            self._spawning.cancel()
        if senses is not None:
            self.senses = list(senses)
        if config is not None:
            self.config = config
        self.failures = 0
        self.start()

    def _deadline(self, sense: str) -> float:
        settings = self.config.senses.get(sense)
        return self.policy.limits(settings).hard + 1.0 if settings else 5.0

    def kill(self) -> None:
        """Forced shutdown: no waiting."""
        self._stopping = True
        self._publish()
        if self._respawn:
            self._respawn.cancel()
        if self.worker is not None:
            self.worker.signal(9)

    # computes --------------------------------------------------------------
    def runnable(self) -> set[str]:
        if self.state != WorkerState.READY or self._stopping:
            return set()
        return self.loaded

    def compute(self, compute_id: int, sense: str, reason: Reason, sources: dict[str, str] | None = None,
                filters: dict[str, dict] | None = None, bind: dict | None = None) -> bool:
        worker = self.worker
        if self.state != WorkerState.READY or worker is None:
            return False
        inflight = Inflight(compute_id, sense, reason, self.clock())
        settings = self.config.senses.get(sense)
        if settings is not None:
            loop = asyncio.get_running_loop()
            inflight.timeout = settings.timeout
            inflight.deadline = loop.time() + settings.timeout
            if inflight.deadline < self._deadlines_at:
                self._arm_deadlines(loop, inflight.deadline)
        self.inflight[compute_id] = inflight
        if not worker.send(protocol.Compute(id=compute_id, sense=sense, reason=reason, sources=sources,
                                            filters=filters, bind=bind)):
            self.inflight.pop(compute_id, None)
            inflight.disarm()
            if worker.alive:
                self._input_lost(worker, sense)
            return False
        return True

    def _input_lost(self, worker: WorkerProcess, sense: str) -> None:
        """The worker lives but its input pipe is closed: it can hear nothing more, so replace it."""
        self.state = WorkerState.RESTARTING  # nothing more is sent to it; _died respawns it
        self.hooks.group_event(self.group, logrows.worker_killed(
            self.group, worker.pid, sense, "its protocol input pipe is closed, so it can receive nothing"))
        self.kill_worker()

    def _arm_deadlines(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._deadlines is not None:
            self._deadlines.cancel()
        self._deadlines_at = when
        self._deadlines = loop.call_at(when, self._check_deadlines)

    def _check_deadlines(self) -> None:
        """The earliest soft timeout is due: time out every compute past its own, re-arm for the next."""
        loop = asyncio.get_running_loop()
        self._deadlines, self._deadlines_at = None, float("inf")
        now = loop.time() + 0.002  # timers may fire a hair early (uvloop counts in ms): never spin on one
        for inflight in [i for i in self.inflight.values() if not i.cancelled and i.deadline <= now]:
            self._soft_timeout(inflight, inflight.timeout)
        later = [i.deadline for i in self.inflight.values() if not i.cancelled]
        if later:
            self._arm_deadlines(loop, min(later))

    def _soft_timeout(self, inflight: Inflight, timeout: float) -> None:
        if self.inflight.get(inflight.id) is not inflight:
            return
        inflight.cancelled = True
        settings = self.config.senses.get(inflight.sense)
        grace = self.policy.limits(settings).grace if settings is not None else 0.0
        inflight.handles.append(asyncio.get_running_loop().call_later(grace, self._grace_expired, inflight))
        if self.worker is not None:
            self.worker.send(protocol.Cancel(id=inflight.id))
            if self.worker.pid is not None and grace > 0:
                inflight.threads_at_timeout = (asyncio.get_running_loop().time(), threads_of(self.worker.pid))
        self.hooks.compute_timed_out(self.group, inflight, timeout)

    def kill_for(self, blame: Blame | None) -> None:
        """Stop the worker now, for `blame` (the sense it is stopped for), or for no sense's fault (None)."""
        self._kill_evidence = blame
        self._breach_kill = blame is None
        self.kill_worker()

    def kill_worker(self, term_wait: float = 0.2) -> None:
        """Stop the worker now (TERM, briefly, then KILL); it is respawned with the usual back-off."""
        if self.worker is not None:
            asyncio.get_running_loop().create_task(self.worker.terminate(term_wait))

    def _grace_expired(self, inflight: Inflight) -> None:
        worker = self.worker
        if self.inflight.get(inflight.id) is not inflight or worker is None:
            return
        hog = self._cpu_hog(worker, inflight)
        if hog is not None:
            self.hooks.group_event(self.group, logrows.worker_killed(
                self.group, worker.pid, hog.sense, f"compute of {inflight.sense} still running past its grace period; "
                                                   f"{hog.sense}: {hog.because}"))
        else:
            self.hooks.group_event(self.group, logrows.worker_killed(
                self.group, worker.pid, inflight.sense,
                f"compute of {inflight.sense} still running past its grace period"))
        self._kill_evidence = hog or Blame(inflight.sense, "it ran past its grace period, so its worker was killed")
        asyncio.get_running_loop().create_task(worker.terminate(self.policy.term_wait))

    def _cpu_hog(self, worker: WorkerProcess, inflight: Inflight) -> Blame | None:
        """Another sense whose code held the CPU through the grace (see `oncpu`), when one did."""
        if inflight.threads_at_timeout is None or worker.pid is None:
            return None
        at, before = inflight.threads_at_timeout
        computes = {i.id: i.sense for i in self.inflight.values()}
        owners = {native: sense for native, sense in self.owners.values()}
        return grace_culprit(before, threads_of(worker.pid), asyncio.get_running_loop().time() - at,
                             inflight.sense, computes, owners)

    def _on_message(self, worker: WorkerProcess, message: protocol.Message | protocol.Malformed) -> None:
        if isinstance(message, protocol.Malformed):
            self.hooks.group_event(self.group, logrows.malformed(self.group, worker.pid, message.problem,
                                                                 message.line.decode("utf-8", "replace")))
            return
        if isinstance(message, protocol.ThreadOwner):
            if len(self.owners) >= MAX_OWNERS:
                self.owners.pop(next(iter(self.owners)))
            self.owners[message.ident] = (message.native_id, message.sense)
            return
        if isinstance(message, protocol.ChildOwner):
            if len(self.children) >= MAX_OWNERS:
                self.children.pop(next(iter(self.children)))
            self.children[message.pid] = message.sense
            return
        if isinstance(message, protocol.DatabaseCreated):
            self.hooks.database_created(self.group, message.sense, message.why)
            return
        if isinstance(message, protocol.Fatal):
            self._fatal = (time.monotonic(), Blame(message.sense, f"its code {message.what}"))
            return
        if isinstance(message, protocol.Output):
            if message.id in self.inflight:  # a line from a compute already answered (abandoned) is dropped
                self.hooks.compute_output(self.group, message)
            return
        if isinstance(message, (protocol.Signal, protocol.Silent, protocol.Error)):
            inflight = self.inflight.pop(message.id, None)
            if inflight is None:
                return  # a late answer for a compute already accounted for
            inflight.disarm()
            self.hooks.compute_answered(self.group, inflight, message)
        elif isinstance(message, protocol.ReadPeer):
            asyncio.get_running_loop().create_task(self._read_peer(worker, message))

    async def _read_peer(self, worker: WorkerProcess, message: protocol.ReadPeer) -> None:
        """Answer a compute waiting for a lazy peer, on the worker that asked (a respawned one never asked)."""
        try:
            error = await self.hooks.peer_read(self.group, message)
        except Exception as exc:  # answered whatever happens: the compute waits for it
            error = f"{type(exc).__name__}: {exc}"
        if worker is self.worker:
            worker.send(protocol.PeerRead(message.request, error))

    def _on_stderr(self, worker: WorkerProcess, line: str) -> None:
        self.hooks.worker_stderr(self.group, worker.pid, line)

    def describe(self) -> dict:
        return {
            "group": self.group, "state": self.state, "pid": self.worker.pid if self.worker else None,
            "restarts": self.restarts, "senses": self.senses, "loaded": sorted(self.loaded),
            "failed": {k: v.summary() for k, v in self.failed.items()},
            "failed_since": dict(self.failed_since),
            "next_retry": self.next_retry, "last_exit": self.last_exit,
            "computing": sorted(i.sense for i in self.inflight.values()),
        }
