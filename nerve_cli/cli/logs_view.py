"""Rendering for `nerve logs`: a Rich table, plain lines while following, or JSON lines."""

from __future__ import annotations

import sys
from typing import Any

from nerve_cli.cli import output

SUMMARY_WIDTH = 100


def summary(payload: Any, width: int = SUMMARY_WIDTH) -> str:
    """A compact one-line view of a payload: `key=value key=value`, cut to `width`."""
    if payload is None:
        return ""
    if isinstance(payload, dict):
        # an error's message says more than its traceback; show it first
        keys = sorted(payload, key=lambda k: (k not in ("message", "outcome", "reason"), 0))
        text = " ".join(f"{k}={_short(payload[k])}" for k in keys if k != "traceback")
    else:
        text = _short(payload, width)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _short(value: Any, width: int = 40) -> str:
    if isinstance(value, (dict, list)):
        import orjson

        value = orjson.dumps(value).decode()
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _cells(row: dict, width: int = SUMMARY_WIDTH) -> list[str]:
    # the table shows UTC to the second; --json keeps the full ISO time with ms
    when = row["time"][:19].replace("T", " ")
    return [when, row["source"], row["type"], row["ref_id"] or "", summary(row["payload"], width)]


def print_rows(rows: list[dict], *, table: bool) -> None:
    if table:
        fixed = max([0] + [sum(len(c) for c in _cells(r, 0)[:4]) for r in rows])
        width = max(20, output.console().width - fixed - 16)
        t = output.table(None, ["time (UTC)", "source", "type", "ref", "payload"], (_cells(r, width) for r in rows))
        for column in t.columns:
            column.no_wrap = True
        t.columns[4].overflow = "ellipsis"
        output.show(t)
    else:
        from rich.text import Text

        for row in rows:
            time_, source, type_, ref, text = _cells(row)
            line = Text(time_, style="dim") + Text(f"  {source:<8} {type_:<16} {ref:<14} ") + Text(text)
            output.console().print(line, no_wrap=True, overflow="ellipsis")
    sys.stdout.flush()


def print_jsonl(rows: list[dict], **_: Any) -> None:
    import orjson

    out = sys.stdout
    for row in rows:
        out.write(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS).decode() + "\n")
    out.flush()


def archived_note(layout, history) -> None:
    if history.archived_days:
        first, last = history.archived_days[0], history.archived_days[-1]
        where = history.folder.relative_to(layout.home) if history.folder else "the archive"
        days = first if first == last else f"{first} … {last}"
        output.err_console().print(f"including archived days {days} from {where}", style="dim", highlight=False)
    for problem in history.problems:
        output.warn(problem)


def no_log(layout) -> None:
    output.err_console().print(
        f"No log yet: {layout.logs_db} does not exist. The engine has not run in this instance; "
        "start it with `nerve run`.",
        highlight=False,
    )


def nothing() -> None:
    output.err_console().print("No log rows match.", style="dim", highlight=False)
