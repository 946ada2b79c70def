"""Cold archive: move whole old UTC days out of the databases into JSONL.

For each database (logs.db, events.db and every data/senses/<name>.db), one day at a time:

1. stream the day's rows into `<day>.jsonl.tmp`, fsync file and folder;
2. in ONE transaction: delete exactly those rows (the delete must remove as
   many rows as were written, else it rolls back and the day is redone),
   record the file in the manifest and advance `archived_up_to`; commit;
3. rename the .tmp to `<day>.jsonl`, fsync the folder.

A crash before the commit leaves the rows in the database and an
uncommitted .tmp, which the next run deletes and re-exports. A crash after it
leaves a committed .tmp, which the next run renames. Either way every row
exists exactly once across database + JSONL. VACUUM runs at the end.

Log rows of threads still queued/started stay in logs.db. When their thread
has ended, a later run moves them into a part file `<day>.N.jsonl` (N ≥ 2) of
the day they belong to, so a day file is never rewritten once committed.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.store.archive_db import DAY_MS, day_index, day_str
from nerve_cli.store.archive_report import ArchiveReport, DbReport, ProgressEvent
from nerve_cli.store.archive_run import CRASH_ENV, CrashHook, DbRun, Ticker
from nerve_cli.store.logs import now_ms as _now_ms
from nerve_cli.store.sqlitefile import private_dir

__all__ = ["archive", "ArchiveReport", "DbReport", "ProgressEvent", "CRASH_ENV", "day_str", "day_index"]


def databases(layout: Layout) -> list[tuple[str, Path, Path, bool]]:
    """(label, db path, archive folder, is_logs) for every database that exists."""
    found = []
    if layout.logs_db.exists():
        found.append(("logs", layout.logs_db, layout.archive / "logs", True))
    if layout.events_db.exists():  # archived like a sense database: its `_nerve_archive` names events(ts)
        found.append(("events", layout.events_db, layout.archive / "events", False))
    if layout.sense_data.is_dir():
        for path in sorted(layout.sense_data.glob("*.db")):
            found.append((f"sense {path.stem}", path, layout.sense_archive(path.stem), False))
    return found


def check_writable(folders: list[Path]) -> None:
    """Every archive folder exists and takes a file, or nothing is archived at all."""
    for folder in folders:
        probe = folder / ".nerve-write-test"
        try:
            private_dir(folder)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise NerveError(
                f"cannot write to archive folder {folder}: {exc.strerror or exc}. "
                "Nothing was archived or deleted; make the folder writable (or move the file in its way) "
                "and run `nerve archive` again."
            ) from None


@contextmanager
def archive_lock(layout: Layout) -> Iterator[None]:
    """One archiver per instance (the engine's daily run and a manual `nerve archive`)."""
    private_dir(layout.archive)
    with os.fdopen(os.open(layout.archive / ".lock", os.O_RDWR | os.O_CREAT, 0o600), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NerveError(f"another archive run holds {layout.archive / '.lock'}; try again when it ends") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def archive(
    home: Path,
    *,
    older_than_s: float,
    dry_run: bool = False,
    vacuum: bool = True,
    progress: Callable[[ProgressEvent], None] | None = None,
    now_ms: int | None = None,
    repair: bool = False,
) -> ArchiveReport:
    """Archive every whole UTC day that ended at least `older_than_s` ago. See the module doc.

    Raises NerveError (before touching anything) when an archive folder is
    not writable or another archive run is active. Problems in one database
    (a truncated committed file, rows older than its watermark, a database
    error) leave that database as it is and are listed in the report; the
    others are archived. `repair=True` moves rows found older than a
    watermark into part files instead of refusing.
    """
    layout = Layout(Path(home))
    cutoff = (_now_ms() if now_ms is None else now_ms) - int(older_than_s * 1000)
    # the last day that ended before the cut-off; an age reaching before 1970 archives nothing (and a
    # date that far back is not one datetime can name)
    last_day = max(cutoff // DAY_MS - 1, -1)
    report = ArchiveReport(up_to=day_str(last_day), dry_run=dry_run)
    found = databases(layout)
    if dry_run:
        report.databases = [DbRun.open(*db, last_day, repair).plan_only() for db in found]
        return report
    if not found:
        return report
    check_writable([folder for _, _, folder, _ in found])
    crash = CrashHook()
    with archive_lock(layout):
        runs = [DbRun.open(*db, last_day, repair, crash) for db in found]
        for run in runs:
            run.prepare()
        ticker = Ticker(progress, sum(r.total_days for r in runs), sum(r.total_rows for r in runs))
        for run in runs:
            run.execute(ticker)
        for run in runs:
            run.finish(vacuum)
            report.databases.append(run.report)
    return report
