"""A sense's numbers over real time, for `nerve sense show --chart` and `nerve top`: the data, not the drawing.

Points come from the hot database and the archived JSONL days alike, so a
chart spans both; a stretch with no data much longer than the sense's usual
spacing is reported as a gap (and drawn as one, never bridged by a line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Iterable, Iterator

from nerve_cli.errors import SenseError
from nerve_cli.home import Layout
from nerve_cli.ops.senses.rows import read_rows
from nerve_cli.store.history import day_of, sense_history
from nerve_cli.store.jsonl import iter_lines, list_files

GAP_FACTOR = 5          # a gap is this many times the median spacing between points ...
MIN_GAP_MS = 60_000     # ... and at least a minute, so a jittery fast sense shows no false gaps


@dataclass
class Series:
    sense: str
    column: str                          # "signal", a payload key, or "table.column"
    points: list[tuple[int, float]]      # (unix ms, value), oldest first
    archived: int = 0                    # how many of the points came from archived days
    skipped: int = 0                     # rows whose value was not a number (left out)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (last point before, first point after)

    @property
    def live(self) -> int:
        return len(self.points) - self.archived

    def segments(self) -> list[list[tuple[int, float]]]:
        """The points split at each gap: one line per segment."""
        out: list[list[tuple[int, float]]] = [[]]
        starts = {after for _, after in self.gaps}
        for point in self.points:
            if point[0] in starts and out[-1]:
                out.append([])
            out[-1].append(point)
        return [s for s in out if s]


def sense_series(home: Path, name: str, column: str | None = None,
                 since_ms: int | None = None, until_ms: int | None = None) -> Series:
    """The numbers of sense `name` between `since_ms` and `until_ms` (either open).

    `column` None plots the signal itself; `key` a key of object signals;
    `table.column` a column of one of the sense's tables (its `time=` column is the time axis).
    """
    layout = Layout(Path(home))
    picked = _table_column(layout.sense_db(name), column)
    rows: Iterable[tuple[int, Any, int]]
    if picked is not None:
        rows = _table_rows(layout, name, *picked, since_ms, until_ms)
    else:
        rows = _signal_rows(home, name, column, since_ms, until_ms)
    series = Series(name, column or "signal", [])
    for ts, value, archived in sorted(rows, key=lambda r: r[0]):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            series.points.append((ts, float(value)))
            series.archived += archived
        else:
            series.skipped += 1
    if series.skipped and not series.points:
        raise SenseError(_not_numeric(layout.sense_db(name), name, column))
    series.gaps = find_gaps([t for t, _ in series.points])
    return series


def find_gaps(stamps: list[int]) -> list[tuple[int, int]]:
    """Pairs of neighbouring stamps further apart than GAP_FACTOR × the median spacing (and MIN_GAP_MS)."""
    if len(stamps) < 3:
        return []
    steps = [b - a for a, b in zip(stamps, stamps[1:])]
    limit = max(GAP_FACTOR * median(steps), MIN_GAP_MS)
    return [(a, b) for a, b in zip(stamps, stamps[1:]) if b - a > limit]


# --- signals ---------------------------------------------------------------------


def _signal_rows(home: Path, name: str, key: str | None, since_ms: int | None,
                 until_ms: int | None) -> Iterator[tuple[int, Any, int]]:
    hot = _hot_ids(Layout(Path(home)).sense_db(name), since_ms)
    for row in sense_history(home, name, since_ms):
        if until_ms is not None and row["ts"] > until_ms:
            continue
        payload = row["payload"]
        value = payload.get(key) if key is not None and isinstance(payload, dict) else payload
        if key is not None and not isinstance(payload, dict):
            value = None
        yield row["ts"], value, int(row["id"] not in hot)


def _hot_ids(path: Path, since_ms: int | None) -> set[int]:
    rows = read_rows(path, "SELECT id FROM _signals WHERE ts >= ?", (since_ms or 0,))
    return {r[0] for r in rows or []}


# --- table columns ---------------------------------------------------------------


def _table_column(path: Path, column: str | None) -> tuple[str, str] | None:
    """(`table`, `column`) when `column` reads `table.column` and that table exists, else None."""
    if not column or "." not in column:
        return None
    table, col = column.split(".", 1)
    if not read_rows(path, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)):
        return None
    if col not in [r[1] for r in read_rows(path, f"PRAGMA table_info({_q(table)})") or []]:
        known = ", ".join(r[1] for r in read_rows(path, f"PRAGMA table_info({_q(table)})") or [])
        raise SenseError(f"--column {column}: table {table!r} has no column {col!r} (columns: {known})")
    return table, col


def _time_column(path: Path, table: str) -> str:
    rows = read_rows(path, "SELECT time_column FROM _nerve_archive WHERE table_name = ?", (table,))
    if not rows:
        raise SenseError(f"--column {table}.…: table {table!r} has no time column to plot against; declare it in "
                         f"schema.py as @table(..., time=\"ts\") (an int field of unix ms) and run `nerve sense migrate`")
    return rows[0][0]


def _table_rows(layout: Layout, name: str, table: str, col: str, since_ms: int | None,
                until_ms: int | None) -> list[tuple[int, Any, int]]:
    path = layout.sense_db(name)
    tcol = _time_column(path, table)
    low, high = since_ms if since_ms is not None else -(2**62), until_ms if until_ms is not None else 2**62
    hot = read_rows(path, f"SELECT {_q(tcol)}, {_q(col)} FROM {_q(table)} WHERE {_q(tcol)} BETWEEN ? AND ?",
                (low, high)) or []
    out = [(ts, value, 0) for ts, value in hot if isinstance(ts, int)]
    seen = {ts for ts, _, _ in out}
    since_day = day_of(since_ms) if since_ms is not None else None
    for f in list_files(layout.sense_archive(name), since_day):
        for line in iter_lines(f.path):
            row = line.get("row") if isinstance(line, dict) and line.get("table") == table else None
            if not isinstance(row, dict):
                continue
            ts = row.get(tcol)
            if isinstance(ts, int) and low <= ts <= high and ts not in seen:
                out.append((ts, row.get(col), 1))
    return out


# --- helpers ---------------------------------------------------------------------


def _not_numeric(path: Path, name: str, column: str | None) -> str:
    what = f"`{column}` of {name}'s signals" if column else f"{name}'s signals"
    tables = [r[0] for r in read_rows(path, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite_%'") or []]
    hint = f"; or a table column, e.g. --column {tables[0]}.COLUMN" if tables else ""
    return f"{what} are not numbers: pick a numeric key of the signal with --column KEY{hint}"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
