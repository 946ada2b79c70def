"""Time, one way everywhere: how documents name it, how people see it, how they type it.

- In documents (the `--json` contract) a point in time is two fields:
  `<name>_ms`, integer unix milliseconds, and `<name>`, the same instant as an
  ISO 8601 UTC string with milliseconds (`2026-08-01T12:00:00.123Z`). Either
  both are null or neither is. A duration is `<name>_s`, seconds (a number).
- On screen a time is local with its zone shown (`2026-08-01 14:00:00 CEST`),
  or UTC labelled as such (`2026-08-01 12:00:00 UTC`) with `--utc`.
- Typed times (`--since`, `--until`) are durations ago (`90s`, `1h30m`, `1w`: nerve.yaml's grammar),
  dates or ISO times (read in the zone times are shown in unless they carry
  one), or epoch seconds.

Only the standard library: the CLI's start-up and shell completion may import this.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from nerve_cli.durations import parse_duration

EPOCH_RE = re.compile(r"^\d{9,11}(\.\d+)?\Z")  # epoch seconds: 1973 … 5138; more digits are milliseconds
ACCEPTED = ("a duration ago like 90s, 10m, 1h30m, 2d or 1w; a date 2026-08-01; an ISO time "
            "2026-08-01T12:00[:00][Z|+02:00]; or epoch seconds like 1785600000")


def iso(ms: int) -> str:
    """Unix ms → `2026-08-01T12:00:00.123Z` (hot: a status of 1,000 senses, the archiver's rows)."""
    day, rest = divmod(int(ms), 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{_date(day)}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


@lru_cache(maxsize=1024)
def _date(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, tz=timezone.utc).strftime("%Y-%m-%d")


def stamp(name: str, ms: int | float | None) -> dict[str, Any]:
    """`{"<name>_ms": 1785600000000, "<name>": "2026-08-01T16:00:00.000Z"}`; both null for None."""
    key_ms = _ms_key(name)
    if ms is None:
        return {key_ms: None, name: None}
    value = int(round(ms))
    return {key_ms: value, name: iso(value)}


@lru_cache(maxsize=256)
def _ms_key(name: str) -> str:
    return f"{name}_ms"  # made once per name: a status of 1,000 senses asks for 6,000 stamps


def seconds_to_ms(seconds: float | None) -> int | None:
    """Epoch seconds (the engine's clock) → unix ms."""
    return None if seconds is None else int(round(seconds * 1000))


def parse_instant(text: str, *, now_ms: int, utc: bool = False) -> int:
    """What a person means by `--since TEXT` / `--until TEXT`, as unix ms.

    Raises ValueError naming the accepted forms.
    """
    raw = text.strip()
    if not raw:
        raise ValueError(f"empty time: expected {ACCEPTED}")
    if raw == "now":
        return now_ms
    if raw.replace(".", "", 1).isdigit():
        if not EPOCH_RE.match(raw):
            hint = " (that looks like milliseconds: divide by 1000)" if len(raw.split(".")[0]) > 11 else ""
            raise ValueError(f"{raw!r} is not epoch seconds{hint}; expected {ACCEPTED}")
        return int(round(float(raw) * 1000))
    if raw[0].isdigit() and "-" not in raw and ":" not in raw:
        try:
            back = int(round(parse_duration(raw) * 1000))
        except (ValueError, OverflowError) as exc:
            if "largest first" in str(exc):  # a duration, only misordered: say just that
                raise
            raise ValueError(f"{raw!r} is not a time: expected {ACCEPTED}") from None
        if back > now_ms:  # before 1970: no log row, signal or event is that old, and no date can show it
            raise ValueError(f"{raw!r} ago is before 1970-01-01, older than anything Nerve keeps; expected {ACCEPTED}")
        return now_ms - back
    try:
        when = datetime.fromisoformat(raw.replace(" ", "T", 1) if len(raw) > 10 else raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a time: expected {ACCEPTED}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc) if utc else when.astimezone()  # naive: the zone times are shown in
    return int(round(when.timestamp() * 1000))


def display(ms: int | None, *, utc: bool = False, date: bool = True, millis: bool = False) -> str:
    """The display rule: `2026-08-01 14:00:00 CEST` (local, zone shown) or `2026-08-01 12:00:00 UTC`."""
    if ms is None:
        return ""
    seconds, rest = divmod(int(ms), 1000)
    when = datetime.fromtimestamp(seconds, tz=timezone.utc)
    if not utc:
        when = when.astimezone()
    text = when.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")
    if millis:
        text += f".{rest:03d}"
    return f"{text} {'UTC' if utc else when.tzname() or when.strftime('%z')}"


def ago(ms: int | None, now_ms: int) -> str:
    """`never`, `12s ago`, `5m ago`, `3h ago`, `2d ago`, or `in 5m` for the future."""
    if ms is None:
        return "never"
    delta = (now_ms - ms) / 1000
    return f"{span(delta)} ago" if delta >= 0 else f"in {span(-delta)}"


def span(seconds: float) -> str:
    """A short human duration: `850ms`, `42s`, `12m`, `3.5h`, `2d`."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"


def elapsed(seconds: float) -> str:
    """A measured duration, never rounded away: `<0.1ms`, `0.4ms`, `12ms`, `850ms`, `1.2s`, then as `span`.

    Model calls and short threads take well under a millisecond to a few; `span`
    would show them all as `0ms`.
    """
    ms = seconds * 1000
    if ms < 0.05:
        return "<0.1ms"
    if ms < 9.95:
        return f"{ms:.1f}ms"
    if ms < 999.5:
        return f"{ms:.0f}ms"
    if seconds < 59.95:
        return f"{seconds:.1f}s"
    return span(seconds)
