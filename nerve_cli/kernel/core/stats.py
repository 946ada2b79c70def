"""Counters the kernel keeps about its own work, for `nerve run --metrics`.

Kept whether or not metrics are served: each observation is a dict lookup, a
bisect and two additions, never any formatting. The metrics endpoint turns
them into Prometheus families only when scraped.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import defaultdict

from nerve_cli.vocab.outcomes import Outcome

# seconds; the last bucket is +Inf
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (upper bound, count of observations ≤ it), ending with +Inf."""
        out, total = [], 0
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), self.counts):
            total += count
            out.append((bound, total))
        return out


class EngineStats:
    def __init__(self) -> None:
        self.computes: dict[tuple[str, str], int] = defaultdict(int)   # (sense, outcome) → count
        self.durations: dict[str, Histogram] = defaultdict(Histogram)  # sense → compute durations
        self.lateness = Histogram()   # interval computes: how late their timer fired
        self.hop = Histogram()        # a signal reaching the kernel → its listener's compute sent
        self._signalled: dict[str, float] = {}  # listener → when the first signal still waiting for it arrived

    def finished(self, sense: str, outcome: Outcome, duration_ms: float) -> None:
        self.computes[(sense, outcome)] += 1
        self.durations[sense].observe(duration_ms / 1000)

    def late(self, ms: float) -> None:
        self.lateness.observe(ms / 1000)

    def signalled(self, listeners: list[str]) -> None:
        now = time.perf_counter()
        for sense in listeners:
            self._signalled.setdefault(sense, now)  # a burst coalesces: the hop counts from its first signal

    def dispatched(self, sense: str) -> None:
        started = self._signalled.pop(sense, None)
        if started is not None:
            self.hop.observe(time.perf_counter() - started)
