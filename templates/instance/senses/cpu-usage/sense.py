"""CPU usage: percent busy across all cores since the previous compute."""

import time

import psutil

from .schema import Sample

# cpu_percent(interval=None) compares with the previous call; the very first call
# has nothing to compare with. Prime it when the worker loads the sense, and make
# sure at least a short window has passed before the first real reading.
psutil.cpu_percent(interval=None)
_LOADED = time.monotonic()
MIN_WINDOW = 0.2


def compute(db, peers):
    waited = time.monotonic() - _LOADED
    if waited < MIN_WINDOW:  # only right after the worker started
        time.sleep(MIN_WINDOW - waited)
    percent = psutil.cpu_percent(interval=None)
    db.insert(Sample(ts=time.time_ns() // 1_000_000, percent=percent))
    return percent  # the signal's payload; returning None would stay silent
