"""Disk usage of the filesystem this instance lives on (where data/ grows)."""

import time
from pathlib import Path

import psutil

from .schema import Sample

# senses/disk-usage/sense.py → the instance folder is two levels up.
INSTANCE = Path(__file__).resolve().parents[2]


def compute(db, peers):
    path = INSTANCE if INSTANCE.exists() else Path("/")
    usage = psutil.disk_usage(str(path))
    db.insert(
        Sample(
            ts=time.time_ns() // 1_000_000,
            path=str(path),
            percent=usage.percent,
            used=usage.used,
            free=usage.free,
            total=usage.total,
        )
    )
    return {"percent": usage.percent, "free_gb": round(usage.free / 1e9, 1)}
