"""The one duration grammar: nerve.yaml's keys and every `--since`, `--until`, `--for`, `--older-than`.

A duration is one or more parts, each a number with a unit, written together
(`500ms`, `90s`, `10m`, `1h30m`, `1.5h`, `2d`, `1w`, no spaces): ms, s, m, h,
d (24 h) and w (7 d). A bare number is refused, so the
unit is always visible; so is a negative one. Each unit appears at most once,
largest first, so `1h30m` and `30m1h` cannot both mean the same thing.

Only the standard library: the CLI's start-up and shell completion may import this.
"""

from __future__ import annotations

import re

PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
UNITS = ("w", "d", "h", "m", "s", "ms")  # largest first
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
EXAMPLES = "500ms, 90s, 10m, 1h30m, 2d or 1w"


def parse_duration(value: object) -> float:
    """`'1h30m'` → 5400.0 seconds. ValueError naming the accepted forms for anything else."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a duration like {EXAMPLES}, got {value!r}")
    compact = value.strip()
    parts = PART.findall(compact)
    if not parts or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"expected a duration like {EXAMPLES}, got {value!r}")
    order = [UNITS.index(unit) for _, unit in parts]
    if order != sorted(set(order)):
        raise ValueError(f"{value!r}: write each unit once, largest first (like 1h30m), got "
                         f"{' then '.join(unit for _, unit in parts)}")
    return sum(float(number) * UNIT_SECONDS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """0.5 → '500ms', 90 → '90s', 600 → '10m', 5400 → '90m': the largest unit that holds it whole.

    What it prints, parse_duration reads back to the same value (to the millisecond).
    """
    for unit in ("d", "h", "m", "s"):
        size = UNIT_SECONDS[unit]
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{round(seconds * 1000)}ms"
