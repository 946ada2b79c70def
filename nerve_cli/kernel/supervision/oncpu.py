"""Which thread of a worker used the CPU while a compute ran past its grace: the kernel's evidence at a grace kill.

Python runs one thread at a time. A compute whose code holds that lock in a
long C call (a catastrophic regex, a big `sum` over C data) starves every
other thread of its worker: a group-mate's compute that only slept cannot
come back and runs past its timeout and grace, though its code did nothing.
Killing the worker for the mate named the innocent sense. So the kernel reads
each of the worker's threads' CPU time (`/proc/PID/task/*/stat`) when a
compute times out and again when its grace ends, and splits what was used in
between: a sync compute's thread is named `nerve:c<id>` by the worker while it
runs compute `id` (`worker.evidence.name_compute_thread`), a background
thread is its announced owner's. The sense whose threads used most of it is
the one the worker is killed for — unless that is the timed-out sense itself,
or nothing used the CPU (the compute is stuck in its own code: it is blamed,
as before). CPU that went to threads nobody owns names nobody.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nerve_cli.kernel.supervision.penalty import Blame

COMPUTE_PREFIX = "nerve:c"  # + the compute id modulo ID_MODULO: a thread name holds 15 bytes
ID_MODULO = 10 ** 8
MAJORITY = 0.5
BUSY = 0.25  # of the CPU a thread could get in the grace: below it nothing hogged it (the timed-out code is stuck)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

Threads = dict[int, tuple[str, float]]  # native thread id → (its name, its CPU seconds so far)


def _share() -> float:
    """The part of a core one busy thread can have now: on a loaded machine a hog gets less of it."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    cores = os.cpu_count() or 1
    return min(1.0, cores / load) if load > cores else 1.0


def compute_thread_name(compute_id: int) -> str:
    return f"{COMPUTE_PREFIX}{compute_id % ID_MODULO}"


def threads_of(pid: int, proc: Path = Path("/proc")) -> Threads:
    """Each thread of `pid` with its name and CPU seconds; empty when it cannot be read (gone, not Linux)."""
    found: Threads = {}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        try:  # after the name: state is field 3, utime 14, stime 15 (1-based over the whole line)
            found[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / _TICK)
        except (ValueError, IndexError):
            continue
    return found


def grace_culprit(before: Threads, after: Threads, wall: float, timed_out: str, computes: Mapping[int, str],
                  owners: Mapping[int, str]) -> Blame | None:
    """The sense other than `timed_out` whose threads used most of the worker's CPU over the `wall` seconds
    between `before` and `after` (`computes`: compute id → sense, `owners`: native thread id → sense), or None."""
    names = {compute_thread_name(id): sense for id, sense in computes.items()}
    shares: dict[str | None, float] = {}
    for tid, (name, cpu) in after.items():
        used = max(0.0, cpu - before[tid][1]) if tid in before else cpu  # a thread started since: all of it
        sense = names.get(name) or owners.get(tid)
        shares[sense] = shares.get(sense, 0.0) + used
    total = sum(shares.values())
    if wall <= 0 or total < BUSY * wall * _share():
        return None
    named = [(used, sense) for sense, used in shares.items() if sense is not None]
    if not named:
        return None
    used, sense = max(named, key=lambda pair: pair[0])
    if sense == timed_out or used / total <= MAJORITY:
        return None
    return Blame(sense, f"its code held the CPU ({used / total:.0%} of the worker's, {used:.1f}s) while {timed_out}'s "
                        "compute, past its timeout, waited to run (Python runs one thread at a time: a long C call "
                        "such as a regex holds it), so the worker was killed for it")
