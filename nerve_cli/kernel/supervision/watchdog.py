"""The resource watchdog: keep each sense group's worker inside its `groups:` limits.

Only groups with a limit are sampled, and the sampling task exists only while
some group has one, so unset limits cost nothing. Memory is the worker's
resident set (with any children it started); CPU is its share of one core
averaged over `cpu_window`, so a short burst is allowed and a sustained spin
is not. On a breach the watchdog calls `on_breach`; the engine stops the
worker (TERM → KILL), its supervisor respawns it with the usual back-off, and
the log says which sense(s) were computing and which figure broke which limit.
The watchdog reads the supervisors and the limits it is handed, never the engine.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import psutil

from nerve_cli.config.model import GroupConfig
from nerve_cli.kernel.supervision.attribution import Usage, cpu_culprit, memory_culprit
from nerve_cli.kernel.supervision.penalty import Blame
from nerve_cli.kernel.supervision.supervisor import GroupSupervisor
from nerve_cli.vocab.states import WorkerState

Breach = Callable[[str, int, str, "Blame | None"], None]  # (group, pid, problem, the sense whose code did it)

SAMPLE_EVERY = 0.25
CHILDREN_EVERY = 16  # samples between scans for the worker's own children (a /proc walk, the costly part)


@dataclass
class _Sampled:
    pid: int
    process: psutil.Process
    cpu: deque = field(default_factory=deque)  # (monotonic, cpu seconds)
    children: list[psutil.Process] = field(default_factory=list)
    ticks: int = 0
    usage: deque[Usage] = field(default_factory=deque)  # per thread and child, over the CPU window (attribution)
    own_rss: int = 0  # the worker process's own resident set at the last sample


def measure(sampled: _Sampled, now: float = 0.0, threads: bool = False,
            computing: frozenset[str] = frozenset()) -> tuple[int, float]:
    """(rss bytes, cpu seconds) of a worker and the children it started; with the per-thread (`threads`) and
    per-child figures kept in `sampled.usage`, to tell whose code used them (`attribution`)."""
    if sampled.ticks % CHILDREN_EVERY == 0:
        try:
            sampled.children = sampled.process.children(recursive=True)
        except psutil.Error:
            sampled.children = []
    sampled.ticks += 1
    rss, cpu = 0, 0.0
    usage = Usage(now, computing=computing)
    for proc in (sampled.process, *sampled.children):
        try:
            with proc.oneshot():
                memory = proc.memory_info().rss
                times = proc.cpu_times()
                used = times.user + times.system
                if proc is sampled.process:
                    sampled.own_rss = memory
                    if threads:
                        usage.threads.update((t.id, t.user_time + t.system_time) for t in proc.threads())
                else:
                    usage.children[proc.pid] = (memory, used, proc.ppid())
        except psutil.Error:
            continue
        rss += memory
        cpu += used
    sampled.usage.append(usage)
    return rss, cpu


def breach(limits: GroupConfig, sampled: _Sampled, rss: int, cpu: float, now: float) -> str | None:
    """A description of the limit this sample breaks, or None."""
    if limits.memory_limit is not None and rss > limits.memory_limit:
        return f"memory {rss / 2**20:.0f} MiB over its limit of {limits.memory_limit / 2**20:.0f} MiB"
    if limits.cpu_limit is None:
        return None
    sampled.cpu.append((now, cpu))
    while len(sampled.cpu) > 2 and sampled.cpu[1][0] <= now - limits.cpu_window:
        sampled.cpu.popleft()
    first_t, first_cpu = sampled.cpu[0]
    span = now - first_t
    if span < limits.cpu_window * 0.95:
        return None  # not a full window yet: bursts are allowed
    share = (cpu - first_cpu) / span * 100
    if share > limits.cpu_limit:
        return f"CPU {share:.0f}% of a core over {span:.1f}s, over its limit of {limits.cpu_limit:g}%"
    return None


class Watchdog:
    """Samples the workers of `supervisors` (the engine's live map) against `limits()` (nerve.yaml `groups:`)."""

    def __init__(self, supervisors: Mapping[str, GroupSupervisor], limits: Callable[[], Mapping[str, GroupConfig]],
                 on_breach: Breach) -> None:
        self.supervisors = supervisors
        self.limits = limits  # a callable: a hot reload swaps the config under a running watchdog
        self.on_breach = on_breach
        self.sampled: dict[str, _Sampled] = {}
        self.task: asyncio.Task | None = None
        self.stopped = False
        self.samples = 0

    def limited_groups(self) -> dict[str, GroupConfig]:
        return {g: c for g, c in self.limits().items()
                if c.memory_limit is not None or c.cpu_limit is not None}

    def update(self) -> None:
        """Start or stop sampling to match the config."""
        wanted = bool(self.limited_groups())
        if wanted and self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        elif not wanted and self.task is not None:
            self.task.cancel()
            self.task = None

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
            self.task = None

    async def _run(self) -> None:
        while not self.stopped:
            self.check(time.monotonic())
            await asyncio.sleep(SAMPLE_EVERY)

    def check(self, now: float) -> None:
        for group, limits in self.limited_groups().items():
            supervisor = self.supervisors.get(group)
            worker = supervisor.worker if supervisor else None
            if (supervisor is None or worker is None or not worker.alive or worker.pid is None
                    or supervisor.state is not WorkerState.READY):
                self.sampled.pop(group, None)
                continue
            sampled = self.sampled.get(group)
            if sampled is None or sampled.pid != worker.pid:
                try:
                    sampled = self.sampled[group] = _Sampled(worker.pid, psutil.Process(worker.pid))
                except psutil.Error:
                    continue
            computing = frozenset(i.sense for i in supervisor.inflight.values())
            rss, cpu = measure(sampled, now, limits.cpu_limit is not None, computing)
            self.samples += 1
            problem = breach(limits, sampled, rss, cpu, now)
            window_start = sampled.cpu[0][0] if sampled.cpu else now  # memory alone: the last sample is enough
            while len(sampled.usage) > 1 and sampled.usage[0].at < window_start:
                sampled.usage.popleft()  # kept as long as the CPU window
            if problem:
                self.sampled.pop(group, None)
                self.on_breach(group, worker.pid, problem, self._culprit(supervisor, sampled, problem))

    @staticmethod
    def _culprit(supervisor: GroupSupervisor, sampled: _Sampled, problem: str) -> Blame | None:
        """The sense whose code used most of what broke the limit (see `attribution`), or None."""
        last = sampled.usage[-1]
        if problem.startswith("memory"):
            return memory_culprit(last, sampled.own_rss, sampled.pid, supervisor.children)
        first = sampled.usage[0]
        computed = frozenset().union(*(u.computing for u in sampled.usage))
        owners = {native: sense for native, sense in supervisor.owners.values()}
        return cpu_culprit(first, last, sampled.pid, owners, supervisor.children, computed)
