"""Memory usage: percent used, bytes used and bytes available."""

import time

import psutil

from .schema import Sample


def compute(db, peers):
    memory = psutil.virtual_memory()
    db.insert(
        Sample(
            ts=time.time_ns() // 1_000_000,
            percent=memory.percent,
            used=memory.used,
            available=memory.available,
        )
    )
    return {"percent": memory.percent, "used": memory.used, "available": memory.available}
