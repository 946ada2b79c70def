"""Counters the kernel keeps about its own work, for `nerve run --metrics`.

Kept whether or not metrics are served: each observation is a dict lookup, a
bisect and two additions, never any formatting. The metrics endpoint turns
them into Prometheus families only when scraped.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import defaultdict
from typing import Any

from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.states import ThreadStatus

# seconds; the last bucket is +Inf. A compute of a small sense takes tens of microseconds, a hop about a
# hundred: the buckets start there, so the histogram tells them apart (at 0.5 ms every compute was in the first).
BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
           0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# a workflow thread: a model round takes seconds, a thread waiting for a person hours or days
THREAD_BUCKETS = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0,
                  12 * 3600.0, 86400.0, 7 * 86400.0)
SUCCESS_MARK, SIGNAL_MARK = "last_success:", "last_signal:"  # logs.db meta: unix ms, so they survive a restart


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (upper bound, count of observations ≤ it), ending with +Inf."""
        out, total = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts):
            total += count
            out.append((bound, total))
        return out


class EngineStats:
    def __init__(self) -> None:
        self.computes: dict[tuple[str, str], int] = defaultdict(int)   # (sense, outcome) → count
        self.durations: dict[str, Histogram] = defaultdict(Histogram)  # sense → compute durations
        self.lateness = Histogram()   # interval computes: how late their timer fired
        self.hop = Histogram()        # a signal reaching the kernel → its listener's compute sent
        self.queue_wait: dict[str, Histogram] = defaultdict(Histogram)  # priority → time in a group's queue
        self._signalled: dict[str, float] = {}  # listener → when the first signal still waiting for it arrived
        self.last_success: dict[str, float] = {}  # sense → epoch seconds of its last signal or silent compute
        self.last_signal: dict[str, float] = {}   # sense → epoch seconds of its last signal
        self.events: dict[str, int] = defaultdict(int)  # channel → events stored (nerve emit, the socket's emit)
        self.model_calls: dict[str, int] = defaultdict(int)  # model → role calls answered
        self.tokens: dict[tuple[str, str], int] = defaultdict(int)  # (model, input|output) → tokens
        self.thread_durations: dict[str, Histogram] = {}  # workflow → started → ended
        self._thread_started: dict[str, float] = {}  # run_id → when it started (epoch s), in this engine

    def restore(self, successes_ms: dict[str, str], signals_ms: dict[str, str]) -> None:
        """The last success and signal of each sense, as the previous engine left them (logs.db meta)."""
        self.last_success.update({sense: int(ms) / 1000 for sense, ms in successes_ms.items()})
        self.last_signal.update({sense: int(ms) / 1000 for sense, ms in signals_ms.items()})

    def finished(self, sense: str, outcome: Outcome, duration_ms: float, now: float) -> None:
        self.computes[(sense, outcome)] += 1
        self.durations[sense].observe(duration_ms / 1000)
        if outcome.succeeded:
            self.last_success[sense] = now
            if outcome is Outcome.SIGNAL:
                self.last_signal[sense] = now

    def queue_waited(self, level: str, seconds: float) -> None:
        self.queue_wait[level].observe(seconds)

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

    def event(self, channel: str) -> None:
        self.events[channel] += 1

    def workflow_event(self, run_id: str, workflow: str, type_: str, payload: dict[str, Any]) -> None:
        """A workflow row as the workflow manager writes it: model calls from role messages, thread durations
        from status changes (threads that started in this engine; one resumed after a restart is not timed)."""
        if type_ == "message":
            meta = payload.get("meta")
            model = meta.get("model") if isinstance(meta, dict) else None
            if isinstance(meta, dict) and isinstance(model, str):
                self.model_calls[model] += 1
                usage = meta.get("usage")
                for kind in ("input", "output"):
                    count = usage.get(kind) if isinstance(usage, dict) else None
                    if isinstance(count, int) and not isinstance(count, bool):
                        self.tokens[(model, kind)] += count
            return
        if type_ == ThreadStatus.STARTED:
            if not payload.get("resumed"):
                self._thread_started.setdefault(run_id, time.time())
        elif type_ in ENDED:
            started = self._thread_started.pop(run_id, None)
            if started is not None:
                hist = self.thread_durations.get(workflow)
                if hist is None:
                    hist = self.thread_durations[workflow] = Histogram(THREAD_BUCKETS)
                hist.observe(max(0.0, time.time() - started))


ENDED = frozenset(s.value for s in ThreadStatus if not s.live)
