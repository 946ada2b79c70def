"""Which sense's code a worker was running when it crashed, read from its last stderr lines.

A sense worker enables `faulthandler`, so a fatal signal (SIGSEGV, SIGABRT,
SIGBUS, SIGFPE, SIGILL) prints the crashing thread's stack before the process
dies:

    Fatal Python error: Segmentation fault

    Stack (most recent call first):
      File "/home/me/.uncaged-nerve/senses/crasher/sense.py", line 5 in compute
      ...

The most recent frame inside `senses/<name>/` names the sense that crashed it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in ')


@dataclass(frozen=True)
class CrashSite:
    sense: str
    where: str  # senses/<name>/sense.py:5


def crash_site(stderr: Iterable[str], home: Path) -> CrashSite | None:
    """The sense whose file is the most recent frame of the last fatal-error stack in `stderr`, if any."""
    lines = list(stderr)
    starts = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
    if not starts:
        return None
    root = Path(os.path.realpath(home))
    seen_frames = False
    for line in lines[starts[-1] + 1:]:
        frame = _FRAME.match(line)
        if frame is None:
            if seen_frames and not line.strip():
                break  # the end of the crashing thread's stack
            continue
        seen_frames = True
        try:
            parts = Path(os.path.realpath(frame["file"])).relative_to(root).parts
        except ValueError:
            continue
        if len(parts) >= 3 and parts[0] == "senses":
            return CrashSite(parts[1], f"{'/'.join(parts)}:{frame['line']}")
    return None
