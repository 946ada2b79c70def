"""Whose code used what a worker group's limits count: the watchdog's evidence when it stops a worker.

A worker's CPU and memory are its own threads plus the processes it started.
The worker announces which sense's code started each background thread
(`ThreadOwner`, by native thread id) and each child process (`ChildOwner`),
and the watchdog samples per thread and per child. At a breach, the figure
that broke the limit is split among senses:

- CPU over the window: each owned thread's and each owned process's (with its
  own children) time goes to its sense; time on the worker's other threads
  (where computes run) goes to the computing sense when exactly one sense
  computed in the whole window, else to nobody;
- memory now: each owned process's resident set goes to its sense (the
  worker's own threads share one address space: their memory cannot be told
  apart).

A sense that accounts for more than half of the figure is the culprit; else
nobody is, and the watchdog says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from nerve_cli.kernel.supervision.penalty import Blame

MAJORITY = 0.5


@dataclass(frozen=True)
class Usage:
    """One sample of a worker: CPU seconds per native thread, and per descendant process (rss, cpu, parent)."""

    at: float
    threads: dict[int, float] = field(default_factory=dict)
    children: dict[int, tuple[int, float, int]] = field(default_factory=dict)
    computing: frozenset[str] = frozenset()


def owner_of(pid: int, children: Mapping[int, tuple[int, float, int]], owned: Mapping[int, str],
             worker: int) -> str | None:
    """The sense whose code started `pid` or its nearest announced ancestor below the worker."""
    seen = 0
    while pid != worker and seen < 64:
        if pid in owned:
            return owned[pid]
        parent = children.get(pid)
        if parent is None:
            return None
        pid, seen = parent[2], seen + 1
    return None


def cpu_culprit(first: Usage, last: Usage, worker: int, thread_owners: Mapping[int, str],
                child_owners: Mapping[int, str], computing: frozenset[str]) -> Blame | None:
    """The sense behind most of the CPU the worker used between two samples, or None."""
    shares: dict[str | None, float] = {}
    for tid, cpu in last.threads.items():
        used = max(0.0, cpu - first.threads.get(tid, 0.0))
        sense = thread_owners.get(tid)
        if sense is None and len(computing) == 1:
            sense = next(iter(computing))  # a compute thread, and only that sense computed all along
        shares[sense] = shares.get(sense, 0.0) + used
    for pid, (_rss, cpu, _parent) in last.children.items():
        used = max(0.0, cpu - (first.children[pid][1] if pid in first.children else 0.0))
        sense = owner_of(pid, last.children, child_owners, worker)
        shares[sense] = shares.get(sense, 0.0) + used
    return _majority(shares, lambda sense, share: (
        f"its code used {share:.0%} of the group's CPU in the window "
        f"({'its background threads and processes' if sense not in computing else 'its compute and what it started'})"))


def memory_culprit(last: Usage, worker_rss: int, worker: int, child_owners: Mapping[int, str]) -> Blame | None:
    """The sense whose child processes hold most of the group's memory, or None."""
    shares: dict[str | None, float] = {None: float(worker_rss)}
    for pid, (rss, _cpu, _parent) in last.children.items():
        sense = owner_of(pid, last.children, child_owners, worker)
        shares[sense] = shares.get(sense, 0.0) + rss
    return _majority(shares, lambda sense, share: f"processes its code started held {share:.0%} of the group's memory")


def _majority(shares: dict[str | None, float], because: Callable[[str, float], str]) -> Blame | None:
    total = sum(shares.values())
    named = [(used, sense) for sense, used in shares.items() if sense is not None]
    if total <= 0 or not named:
        return None
    used, sense = max(named, key=lambda pair: pair[0])
    if used / total <= MAJORITY:
        return None
    return Blame(sense, because(sense, used / total))
