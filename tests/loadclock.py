"""Deadlines in idle-machine seconds, so a test may be slow under load and never wrong.

The suite shares its cores with whatever else runs (CI agents, other test
runs). A fixed wall-clock deadline is a guess about that load; here a deadline
is a number of seconds *the work needs on an idle machine*, and the clock that
spends it runs slower while the machine is contended: each wall second counts
as 1 / contention, contention being runnable tasks per core (from
/proc/loadavg: the larger of the 1-minute average and the tasks runnable right
now). On an idle machine it is the wall clock, so a hang is still caught as
fast as before; at load 12 on 2 cores a 10 s deadline may take a minute.

`wait_for` (enginekit) and the per-test timeout (conftest) both use it; a
one-shot wait (a subprocess timeout) uses `scaled`.
"""

from __future__ import annotations

import os
import time

MAX_CONTENTION = 16.0  # past this the machine is not running tests, it is thrashing: fail rather than wait on


def contention() -> float:
    """How many times slower than on an idle machine CPU-bound work runs now (at least 1)."""
    try:
        with open("/proc/loadavg") as handle:
            fields = handle.read().split()
        load = max(float(fields[0]), float(fields[3].split("/")[0]))
    except (OSError, ValueError, IndexError):  # not Linux: the 1-minute load average, if any
        try:
            load = os.getloadavg()[0]
        except OSError:
            return 1.0
    return min(MAX_CONTENTION, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """A one-shot wall-clock timeout for `seconds` of idle-machine work, at the contention of now."""
    return seconds * contention()


class IdleClock:
    """Spends a budget of idle-machine seconds; `expired()` once it is spent."""

    def __init__(self, seconds: float) -> None:
        self.budget = self.seconds = seconds
        self.started = self._last = time.monotonic()

    def expired(self) -> bool:
        now = time.monotonic()
        self.budget -= (now - self._last) / contention()
        self._last = now
        return self.budget <= 0

    def wall(self) -> float:
        return time.monotonic() - self.started
