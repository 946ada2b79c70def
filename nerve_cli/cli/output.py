"""The one place that renders: consoles, errors, tables, JSON.

Consoles are built lazily so importing the CLI stays cheap, and colour is off
when stdout is not a terminal (Rich decides; NO_COLOR is honoured).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from rich.console import Console


PIPE_WIDTH = 160
_UTC = [False]  # the display rule's one switch: --utc / NERVE_UTC


def set_utc(value: bool) -> None:
    _UTC[0] = value


def utc() -> bool:
    return _UTC[0]


def when(ms: int | float | None, *, date: bool = True, millis: bool = False) -> str:
    """A point in time by the display rule: local with its zone shown, or UTC labelled (--utc); in a pipe or
    with --format tsv|csv, ISO 8601 UTC (`2026-08-01T12:00:00.123Z`), what scripts parse (as gh prints)."""
    from nerve_cli.contract.times import display, iso

    if ms is not None and tabular():
        return iso(int(ms))
    return display(None if ms is None else int(ms), utc=_UTC[0], date=date, millis=millis)


def ago(ms: int | float | None, now_ms: int) -> str:
    """`5m ago` / `in 5m` on a terminal; the instant in ISO 8601 UTC in a pipe or with --format tsv|csv."""
    from nerve_cli.contract.times import ago as relative
    from nerve_cli.contract.times import iso

    if ms is not None and tabular():
        return iso(int(ms))
    return relative(None if ms is None else int(ms), now_ms)


@lru_cache(maxsize=None)
def console() -> "Console":
    # In a pipe Rich assumes 80 columns and cuts table cells short; give tables room instead.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return _console_class()(highlight=False, soft_wrap=True, width=width)  # plain lines are never folded


@lru_cache(maxsize=None)
def err_console() -> "Console":
    return _console_class()(stderr=True, highlight=False)


@lru_cache(maxsize=None)
def _console_class() -> type["Console"]:
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            """Rich would exit 1 itself; the CLI decides, as for every command (cli/pipes.py)."""
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return PipeConsole


def reset() -> None:
    """Forget cached consoles (tests swap stdout between invocations)."""
    console.cache_clear()
    err_console.cache_clear()
    _UTC[0] = False
    _FORMAT[0] = None
    _TERMINAL[0] = None


def error(message: str) -> None:
    """One red line on stderr; no markup is interpreted in the message."""
    from rich.text import Text

    err_console().print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def warn(message: str) -> None:
    from rich.text import Text

    err_console().print(Text("warning: ", style="bold yellow") + Text(message), soft_wrap=True)


def info(message: str, style: str = "") -> None:
    if _plain(message):
        _line(message)
        return
    from rich.text import Text

    console().print(Text(message, style=style))


# what Rich changes in a line it prints: tabs (expanded) and the control codes it drops
_RICH_CHANGES = re.compile("[\t\x07\x08\x0b\x0c\r]")


def _plain(text: str) -> bool:
    """Whether `text` may go to stdout as it is, without Rich (its import is ~20 ms of a command's start-up):
    when Rich would print it unchanged too, on a stdout that is no terminal with no colour forced."""
    if _is_terminal() or os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return False
    return not _RICH_CHANGES.search(text)


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()  # as Rich does after each print


def print_json(data: Any) -> None:
    """One document (nerve_cli.contract) as indented JSON on stdout, never colourised, for scripts."""
    sys.stdout.write(json_document(data))
    sys.stdout.flush()


def json_document(data: Any) -> str:
    """`data` as JSON indented by two spaces, ending in a newline: what `json.dumps(data, indent=2,
    default=str, ensure_ascii=False)` writes, but by orjson (C): stdlib json encodes in Python once it indents,
    16 ms of `nerve status --json` at 1,000 senses. Two differences, both still the same values: a float under
    1e-4 is written out (0.00001, not 1e-05), and NaN or infinity is null (json wrote `NaN`, which is not JSON).
    What orjson refuses (an integer past 64 bits, a lone surrogate, nesting past 254 levels) goes through json."""
    import orjson  # (~0.3 ms: only the commands that print a document)

    try:
        return orjson.dumps(data, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
                            | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n"


def print_json_line(data: Any) -> None:
    """One document of a stream (`logs --json`, `workflow run --json`) as one compact JSON line."""
    import orjson

    sys.stdout.write(orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS).decode() + "\n")
    sys.stdout.flush()


class Tabular:
    """Rows to show: a Rich table on a terminal, tab- or comma-separated lines with a header otherwise.

    `columns` are names, or (name, Rich column options) pairs for the terminal view.
    """

    def __init__(self, title: str | None, columns: Iterable[Any], rows: Iterable[Iterable[Any]],
                 **table_options: Any) -> None:
        self.title = title
        self.columns = [c if isinstance(c, tuple) else (c, {}) for c in columns]
        self.rows = [list(r) for r in rows]
        self.table_options = table_options

    def rich(self) -> Any:
        """Cells are shown as written: `on [a]` is text, not Rich markup."""
        from rich.table import Table
        from rich.text import Text

        if len(self.rows) > LARGE_TABLE:
            return self.compact()
        title = None if self.title is None else Text(self.title, style="italic")
        t = Table(title=title, title_justify="left", header_style="bold", **self.table_options)
        for name, options in self.columns:
            t.add_column(name, **options)
        for row in self.rows:
            t.add_row(*(v if isinstance(v, Text) else Text("" if v is None else str(v)) for v in row))
        return t


    def compact(self) -> Any:
        """Aligned columns without borders, for a table too long to draw cell by cell.

        Rich lays out every cell of a bordered table (≈ 0.4 ms a row): 1,000
        senses took longer to draw than `nerve status` took to ask the engine.
        This is one Text, written at the speed of the terminal. Cells are cut
        at COMPACT_CELL characters so one long error does not widen every line.
        """
        from rich.text import Text

        names = [name for name, _ in self.columns]
        cells = [[_cut(plain_cell(v)) for v in row] for row in self.rows]
        widths = [max([len(n)] + [len(r[i]) for r in cells if i < len(r)]) for i, n in enumerate(names)]
        out = Text()
        if self.title:
            out.append(self.title + "\n", style="italic")
        out.append("  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip() + "\n", style="bold")
        for row in cells:
            out.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
        out.rstrip()
        return out


LARGE_TABLE = 200  # more rows than this are shown as compact columns, not a drawn table
COMPACT_CELL = 60


def _cut(text: str) -> str:
    return text if len(text) <= COMPACT_CELL else text[: COMPACT_CELL - 1] + "…"


def table(title: str | None, columns: Iterable[Any], rows: Iterable[Iterable[Any]], **options: Any) -> Tabular:
    return Tabular(title, columns, rows, **options)


_FORMAT: list[str | None] = [None]  # None: a table on a terminal, tsv in a pipe


def use_format(choice: Any = None, json_flag: bool = False) -> str:
    """Settle how this command prints (`--format`, `--json`) and return it: table, tsv, csv or json."""
    value = "json" if json_flag else (getattr(choice, "value", choice) or None)
    _FORMAT[0] = value
    return value or table_format()


def table_format() -> str:
    chosen = _FORMAT[0]
    if chosen in ("table", "tsv", "csv"):
        return chosen
    return "table" if _is_terminal() else "tsv"


# the stdout last asked and its answer: isatty() is a system call, and a status of 1,000 senses asks once
# per time it shows
_TERMINAL: list[Any] = [None, False]


def _is_terminal() -> bool:
    out = sys.stdout
    if _TERMINAL[0] is not out:
        _TERMINAL[0], _TERMINAL[1] = out, out.isatty()
    return bool(_TERMINAL[1])


def plain_cell(value: Any) -> str:
    """A cell of a TSV line: tabs, newlines and backslashes escaped, so every row stays one line."""
    if value is None:
        return ""
    text = value if type(value) is str else str(getattr(value, "plain", value))
    if not _TSV_SPECIAL.search(text):  # most cells: one scan instead of four replaces
        return text
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


_TSV_SPECIAL = re.compile(r"[\\\t\n\r]")


def write_rows(columns: Iterable[Any], rows: Iterable[Iterable[Any]], *, header: bool = True) -> None:
    """TSV or CSV lines on stdout (the current table format must be one of them)."""
    names = [c[0] if isinstance(c, tuple) else c for c in columns]
    out = sys.stdout
    if table_format() == "csv":
        import csv

        writer = csv.writer(out, lineterminator="\n")
        if header:
            writer.writerow(names)
        writer.writerows(["" if v is None else str(getattr(v, "plain", v)) for v in row] for row in rows)
    else:
        if header:
            out.write("\t".join(names) + "\n")
        for row in rows:
            out.write("\t".join(plain_cell(v) for v in row) + "\n")
    out.flush()


def tabular() -> bool:
    """True when tables are printed as lines (tsv/csv), not drawn."""
    return table_format() in ("tsv", "csv")


def from_ansi(text: str) -> Any:
    """Text already coloured with ANSI codes (a plotext chart) as a Rich renderable."""
    from rich.text import Text

    return Text.from_ansi(text)


def notes(lines: Iterable[str]) -> None:
    """Things the user should know that are not errors (e.g. a separate commit of their own edits)."""
    for line in lines:
        warn(line)


def show(renderable: Any) -> None:
    if isinstance(renderable, Tabular):
        if tabular():
            if renderable.title:
                info(renderable.title)
            write_rows(renderable.columns, renderable.rows)
            return
        renderable = renderable.rich()
    console().print(renderable)


def problem(item: Any) -> None:
    """One config problem, compiler style: `nerve.yaml:5: error: senses.x.throttle: message`."""
    line = f"{item.where()}: {item.severity}: " + (f"{item.path}: " if item.path else "") + item.message
    if _plain(line):
        _line(line)
        return
    from rich.text import Text

    style = "bold red" if item.severity == "error" else "bold yellow"
    text = Text(f"{item.where()}: ") + Text(item.severity, style=style) + Text(": ")
    if item.path:
        text += Text(f"{item.path}: ", style="bold")
    console().print(text + Text(item.message), soft_wrap=True)  # one line per problem, like a compiler
