"""Rendering for `nerve archive`: a progress bar (days, rows) on a terminal, then a summary table."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from nerve_cli.cli import output


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@contextmanager
def progress(enabled: bool) -> Iterator[Callable | None]:
    """Yields a progress callback for archive(), or None when not on a terminal."""
    if not enabled or not output.err_console().is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=output.err_console(), transient=True,
    ) as bar:
        tasks: dict = {}

        def on_progress(event) -> None:
            if not tasks:
                tasks["days"] = bar.add_task("days", total=event.total_days)
                tasks["rows"] = bar.add_task("rows", total=event.total_rows)
            bar.update(tasks["days"], completed=event.days_done, description=f"days ({event.db} {event.day})")
            bar.update(tasks["rows"], completed=event.rows_done)

        yield on_progress


def _days(days: list[str]) -> str:
    if not days:
        return "-"
    return days[0] if len(days) == 1 else f"{days[0]} … {days[-1]} ({len(days)})"


def summary(home: Path, report) -> None:
    if not report.databases:
        output.info("Nothing to archive: no logs.db or sense database yet.")
        return
    if report.dry_run:
        planned = [(d.label, _days(d.planned_days), d.planned_rows, d.watermark_before or "-") for d in report.databases]
        title = f"Dry run: rows of whole UTC days up to {report.up_to} that would move"
        output.show(output.table(title, ["database", "days", "rows", "archived up to"], planned))
    else:
        rows = [
            (d.label, _days([x for x in d.days if "late" not in x]), d.rows,
             human_bytes(d.bytes_freed), d.watermark_after or "-")
            for d in report.databases
        ]
        title = f"Archived whole UTC days up to {report.up_to} into {(home / 'data' / 'archive')}"
        output.show(output.table(title, ["database", "days", "rows moved", "bytes freed", "archived up to"], rows))
    for d in report.databases:
        for note in d.notes:
            output.err_console().print(f"{d.label}: {note}", style="dim", highlight=False)
        for problem in d.problems:
            output.error(f"{d.label}: {problem}")
