"""The one place that renders: consoles, errors, tables, JSON.

Consoles are built lazily so importing the CLI stays cheap, and colour is off
when stdout is not a terminal (Rich decides; NO_COLOR is honoured).
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


PIPE_WIDTH = 160


@lru_cache(maxsize=None)
def console() -> "Console":
    from rich.console import Console

    # In a pipe Rich assumes 80 columns and cuts table cells short; give tables room instead.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=True, width=width)  # plain lines are never folded


@lru_cache(maxsize=None)
def err_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def reset() -> None:
    """Forget cached consoles (tests swap stdout between invocations)."""
    console.cache_clear()
    err_console.cache_clear()


def error(message: str) -> None:
    """One red line on stderr; no markup is interpreted in the message."""
    from rich.text import Text

    err_console().print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def warn(message: str) -> None:
    from rich.text import Text

    err_console().print(Text("warning: ", style="bold yellow") + Text(message), soft_wrap=True)


def info(message: str, style: str = "") -> None:
    from rich.text import Text

    console().print(Text(message, style=style))


def print_json(data: Any) -> None:
    """Plain JSON on stdout, never colourised, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> "Table":
    """A table whose cells are shown as written: `on [a]` is text, not Rich markup."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*(v if isinstance(v, Text) else Text("" if v is None else str(v)) for v in row))
    return t


def from_ansi(text: str) -> Any:
    """Text already coloured with ANSI codes (a plotext chart) as a Rich renderable."""
    from rich.text import Text

    return Text.from_ansi(text)


def show(renderable: Any) -> None:
    console().print(renderable)


def problem(item: Any) -> None:
    """One config problem, compiler style: `nerve.yaml:5: error: senses.x.throttle: message`."""
    from rich.text import Text

    style = "bold red" if item.severity == "error" else "bold yellow"
    text = Text(f"{item.where()}: ") + Text(item.severity, style=style) + Text(": ")
    if item.path:
        text += Text(f"{item.path}: ", style="bold")
    console().print(text + Text(item.message), soft_wrap=True)  # one line per problem, like a compiler
