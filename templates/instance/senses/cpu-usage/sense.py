"""CPU usage: percent busy across all cores since the previous compute."""

import time

import psutil

from .schema import Sample

# The first cpu_percent(interval=None) call has no previous sample and returns 0.0:
# take it now, when the worker loads the sense, so the first compute is real.
psutil.cpu_percent(interval=None)


def compute(db, peers):
    percent = psutil.cpu_percent(interval=None)
    db.insert(Sample(ts=time.time_ns() // 1_000_000, percent=percent))
    return percent  # the signal's payload; returning None would stay silent
