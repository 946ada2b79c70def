"""Which sense's code a worker was running when it crashed, read from its last stderr lines.

A sense worker enables `faulthandler` for every thread, so a fatal signal
(SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) prints each thread's stack, the
crashing one marked, before the process dies:

    Fatal Python error: Segmentation fault

    Current thread 0x00007f4c16d7e6c0 (most recent call first):
      File "/home/me/.uncaged-nerve/senses/crasher/sense.py", line 5 in compute
      ...

    Thread 0x00007f4c179fbb80 (most recent call first):
      ...

The most recent frame inside `senses/<name>/` of the crashing thread names the
sense that crashed it. When none does (a background thread running library
code), the crashing thread's id is returned, for the kernel to look up whose
thread it was (`ThreadOwner` messages).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in ')
_CURRENT = re.compile(r"^(?:Current thread (?P<ident>0x[0-9a-fA-F]+) |Stack )\(most recent call first\):")
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):")


@dataclass(frozen=True)
class CrashSite:
    sense: str | None  # the sense whose file is on the crashing thread's stack, if any
    file: str | None  # that frame's file, relative to the instance: senses/<name>/sense.py
    line: int | None  # and its line
    thread: int | None  # the crashing thread's id (threading.get_ident()), when the dump names it

    @property
    def where(self) -> str | None:
        """senses/<name>/sense.py:5"""
        return f"{self.file}:{self.line}" if self.file is not None else None


def crash_site(stderr: Iterable[str], home: Path) -> CrashSite | None:
    """What the last fatal-error dump in `stderr` says about the crashing thread; None when there is none."""
    lines = list(stderr)
    starts = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
    if not starts:
        return None
    block = lines[starts[-1] + 1:]
    current = next(((i, m) for i, line in enumerate(block) if (m := _CURRENT.match(line))), None)
    if current is None:
        return CrashSite(None, None, None, None)
    index, match = current
    thread = int(match["ident"], 16) if match["ident"] else None
    root = Path(os.path.realpath(home))
    for line in block[index + 1:]:
        if not line.strip() or _THREAD.match(line):
            break  # the end of the crashing thread's stack
        frame = _FRAME.match(line)
        if frame is None:
            continue
        try:
            parts = Path(os.path.realpath(frame["file"])).relative_to(root).parts
        except ValueError:
            continue
        if len(parts) >= 3 and parts[0] == "senses":
            return CrashSite(parts[1], "/".join(parts), int(frame["line"]), thread)
    return CrashSite(None, None, None, thread)
