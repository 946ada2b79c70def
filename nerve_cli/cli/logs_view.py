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
    # the display rule, to the second; --json keeps the instant to the ms
    return [output.when(row["ts"]), row["source"], row["type"], row["ref_id"] or "", summary(row["payload"], width)]


COLUMNS = ["time", "source", "type", "ref", "payload"]
_HEADER_DONE = [False]


def start() -> None:
    """A new command: the next tab-separated rows get a header line."""
    _HEADER_DONE[0] = False


def expand_prints(rows: list[dict]) -> list[dict]:
    """One displayed row per printed line (`#12 text`, `#12 (stderr) text`) instead of one per compute."""
    out = []
    for row in rows:
        lines = row["payload"].get("lines") if row["type"] == "output" and isinstance(row["payload"], dict) else None
        if not lines:
            out.append(row)
            continue
        compute = row["payload"].get("compute_id")
        for line in lines:
            where = "" if line.get("stream") == "stdout" else " (stderr)"
            out.append({**row, "type": "print", "payload": f"#{compute}{where} {line.get('text', '')}"})
    return out


def print_rows(rows: list[dict], *, table: bool) -> None:
    rows = expand_prints(rows)
    if output.tabular():  # a pipe (or --format tsv|csv): whole payloads as JSON, one row per line, one header
        import orjson

        cells = ([output.when(r["ts"]), r["source"], r["type"], r["ref_id"] or "",
                  "" if r["payload"] is None else orjson.dumps(r["payload"], default=str).decode()] for r in rows)
        output.write_rows(COLUMNS, cells, header=not _HEADER_DONE[0])
        _HEADER_DONE[0] = True
        return
    if table:
        fixed = max([0] + [sum(len(c) for c in _cells(r, 0)[:4]) for r in rows])
        width = max(20, output.console().width - fixed - 16)
        columns: list[tuple[str, dict[str, Any]]] = [(name, {"no_wrap": True}) for name in COLUMNS[:4]]
        columns.append(("payload", {"no_wrap": True, "overflow": "ellipsis"}))
        output.show(output.table(None, columns, [_cells(r, width) for r in rows]))
    else:
        from rich.text import Text

        for row in rows:
            time_, source, type_, ref, text = _cells(row)
            line = Text(time_, style="dim") + Text(f"  {source:<8} {type_:<16} {ref:<14} ") + Text(text)
            output.console().print(line, no_wrap=True, overflow="ellipsis")
    sys.stdout.flush()


def print_jsonl(rows: list[dict], **_: Any) -> None:
    """One `log` document per line."""
    from nerve_cli.contract.logs import log_row

    for row in rows:
        output.print_json_line(log_row(row))


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
