"""The attic: where `nerve sense delete` / `nerve workflow delete` put what they remove.

`attic/senses/NAME.<UTC stamp>/` and `attic/workflows/NAME.<UTC stamp>.py` are
committed like the rest of the instance; the stamp in the name (not the file
times, which a move keeps) says how long an entry has been there, which is what
`nerve gc --older-than` goes by.
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path

from nerve_cli.home import Layout

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def stamp(now: float | None = None) -> str:
    return time.strftime(STAMP_FORMAT, time.gmtime(time.time() if now is None else now))


def stamp_age(text: str, now: float | None = None) -> float | None:
    """Seconds since an attic stamp (None when `text` is not one)."""
    try:
        then = calendar.timegm(time.strptime(text, STAMP_FORMAT))
    except ValueError:
        return None
    return (time.time() if now is None else now) - then


def attic_entries(layout: Layout, kind: str, name: str) -> list[Path]:
    """What the attic holds for sense/workflow `name`, oldest first."""
    folder = layout.attic / f"{kind}s"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if split_attic_name(p)[0] == name)


def split_attic_name(path: Path) -> tuple[str, str]:
    """`cpu-usage.20260101T120000Z` → (cpu-usage, stamp); a workflow file's `.py` is dropped first."""
    base = path.name[:-3] if path.name.endswith(".py") else path.name
    name, _, when = base.rpartition(".")
    when = when.split("-")[0]  # `-2`: a second delete of the name within the same second
    return (name, when) if name and stamp_age(when) is not None else ("", "")


def new_attic_path(layout: Layout, kind: str, name: str, suffix: str = "") -> Path:
    base = layout.attic / f"{kind}s" / f"{name}.{stamp()}"
    target = base.with_name(base.name + suffix)
    n = 2
    while target.exists():  # two deletes of one name within a second
        target = base.with_name(f"{base.name}-{n}{suffix}")
        n += 1
    return target
