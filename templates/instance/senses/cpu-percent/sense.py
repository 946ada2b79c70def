"""CPU usage: percent busy across all cores since the previous compute."""

import time

import psutil

from .schema import Sample

MIN_WINDOW = 0.2  # seconds: a shorter window between two readings says nothing

# The previous reading. (psutil.cpu_percent keeps its own per *thread*, and sync
# computes run on worker threads, so the sense keeps the reading itself.)
_previous = (time.monotonic(), psutil.cpu_times())


def _busy(times) -> float:
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def compute(db, peers):
    global _previous
    since, before = _previous
    waited = time.monotonic() - since
    if waited < MIN_WINDOW:  # only right after the worker started
        time.sleep(MIN_WINDOW - waited)
    now = psutil.cpu_times()
    _previous = (time.monotonic(), now)
    total = sum(now) - sum(before)
    percent = round(100 * (_busy(now) - _busy(before)) / total, 1) if total > 0 else 0.0
    db.insert(Sample(ts=time.time_ns() // 1_000_000, percent=percent))
    return percent  # the signal's payload; returning None would stay silent
