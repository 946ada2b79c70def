"""Time as Nerve stores it: integer unix milliseconds (every `ts` column, every `*_ms` field)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Now, in unix milliseconds (exact integer arithmetic: no float rounding at the millisecond)."""
    return time.time_ns() // 1_000_000
