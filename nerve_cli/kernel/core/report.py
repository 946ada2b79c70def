"""The engine's console: one readable line per event worth seeing.

Rich-styled on a terminal, plain text otherwise (Rich decides from isatty and
NO_COLOR). Verbosity: 0 = lifecycle and errors, 1 = + signals and what computes
print (under the sense's name and compute id), 2 = + every compute.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol

from nerve_cli.vocab.logrows import LogRow

# The two callbacks an engine part is handed instead of the engine itself:
Report = Callable[[str, str], None]  # (level, line): one console line; `Reporter` is one


class Log(Protocol):
    """One logs.db row, built by its constructor in `vocab.logrows`; `mark` raises a watermark with it."""

    def __call__(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None: ...


LEVELS = {"error": (0, "bold red"), "warn": (0, "yellow"), "info": (0, "cyan"),
          "signal": (1, "green"), "print": (1, "magenta"), "debug": (2, "dim")}


class Reporter:
    def __init__(self, verbosity: int = 0, stream=None) -> None:
        from rich.console import Console  # ~25 ms: paid by the engine's console, not by importers of Report/Log

        self.verbosity = verbosity
        self.console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)

    def __call__(self, level: str, message: str) -> None:
        needed, style = LEVELS.get(level, (0, ""))
        if needed > self.verbosity:
            return
        from rich.text import Text  # (loaded with the Console above)

        stamp = time.strftime("%H:%M:%S")
        line = Text(f"{stamp} ", style="dim") + Text(f"{level:<6} ", style=style) + Text(message)
        self.console.print(line)
