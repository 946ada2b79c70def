"""Archiving one database: recover leftovers, check, plan, move day by day, vacuum (see store/archive.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from nerve_cli.store import jsonl
from nerve_cli.store.archive_db import DAY_MS, FILE_KEY, WATERMARK, ArchiveDb, day_index, day_str
from nerve_cli.store.archive_report import DbReport, ProgressEvent
from nerve_cli.words import plural

CRASH_ENV = "NERVE_ARCHIVE_CRASH_AT"
RETRIES = 3


class CrashHook:
    """Test hook: NERVE_ARCHIVE_CRASH_AT=N kills this process (SIGKILL) at the Nth checkpoint."""

    def __init__(self) -> None:
        self.at = int(os.environ.get(CRASH_ENV) or 0)
        self.seen = 0

    def point(self, _label: str) -> None:
        if self.at:
            self.seen += 1
            if self.seen == self.at:
                os.kill(os.getpid(), signal.SIGKILL)


class Ticker:
    """Counts days and rows moved across all databases for the progress callback."""

    def __init__(self, callback: Callable[[ProgressEvent], None] | None, total_days: int, total_rows: int) -> None:
        self.callback = callback
        self.event = ProgressEvent(db="", day="", total_days=total_days, total_rows=total_rows)

    def tick(self, db: str, day: str, rows: int) -> None:
        e = self.event
        e.db, e.day, e.days_done, e.rows_done = db, day, e.days_done + 1, e.rows_done + rows
        if self.callback:
            self.callback(e)


class DbRun:
    """Archiving one database: recover, check, plan, move day by day, vacuum."""

    def __init__(self, db: ArchiveDb, last_day: int, repair: bool, crash: CrashHook | None = None) -> None:
        self.db, self.last_day, self.repair, self.crash = db, last_day, repair, crash or CrashHook()
        self.watermark = db.watermark()
        self.report = DbReport(label=db.label, path=db.path, folder=db.folder,
                               watermark_before=self.watermark, watermark_after=self.watermark)
        self.report.notes.extend(db.notes)
        self.manifest = db.manifest()
        try:  # normalised, since days are compared as strings
            self.watermark = day_str(day_index(self.watermark)) if self.watermark is not None else None
        except ValueError:
            self.report.problems.append(
                f"{db.path.name}: {WATERMARK} = {self.watermark!r} is not a date (YYYY-MM-DD); "
                f"nothing was archived from it. Set it to the last archived day in its {db.meta_table} table."
            )
            self.watermark = None
        self.late_days: dict[int, int] = {}
        self.new_days: dict[int, int] = {}

    @classmethod
    def open(cls, label: str, path: Path, folder: Path, is_logs: bool, last_day: int, repair: bool,
             crash: CrashHook | None = None) -> DbRun:
        """A run over one database; one that cannot be opened becomes a run with just that problem."""
        try:
            return cls(ArchiveDb(label, path, folder, is_logs=is_logs), last_day, repair, crash)
        except sqlite3.Error as exc:
            return _Unreadable(label, path, folder, f"cannot read {path}: {exc}")

    @contextmanager
    def guard(self) -> Iterator[None]:
        """A database error (busy past the timeout, corrupt) stops this database only, never half-way."""
        try:
            yield
        except sqlite3.Error as exc:
            if self.db.conn.in_transaction:
                self.db.conn.execute("ROLLBACK")
            self.report.problems.append(
                f"stopped at a database error: {exc}. Days archived before it are complete; "
                "run `nerve archive` again later (a compute or the engine may have held the database)."
            )

    @property
    def total_days(self) -> int:
        return len(self.late_days) + len(self.new_days)

    @property
    def total_rows(self) -> int:
        return sum(self.late_days.values()) + sum(self.new_days.values())

    @property
    def wm_end(self) -> int | None:
        return None if self.watermark is None else (day_index(self.watermark) + 1) * DAY_MS

    def late_sql(self) -> str:
        return self.db.keep_sql if self.repair else f"{self.db.keep_sql} AND {self.db.late_sql}"

    # -- planning ----------------------------------------------------------------
    def plan_only(self) -> DbReport:
        try:
            with self.guard():
                self._check()
                self._plan()
            self.report.planned_days = [day_str(d) for d in sorted(self.late_days | self.new_days)]
            self.report.planned_rows = self.total_rows
            self.report.bytes_before = self.report.bytes_after = self.db.size()
        finally:
            self.db.close()
        return self.report

    def prepare(self) -> None:
        self.report.bytes_before = self.db.size()
        with self.guard():
            self.db.ensure_meta()
            self._recover_tmp()
            self._check()
            self._plan()

    def _plan(self) -> None:
        if self.report.problems:
            return
        if self.wm_end is not None:
            self.late_days = self.db.plan(0, self.wm_end, self.late_sql())
        lo = self.wm_end or 0
        hi = (self.last_day + 1) * DAY_MS
        if hi > lo:
            self.new_days = self.db.plan(lo, hi, self.db.keep_sql)

    def _recover_tmp(self) -> None:
        """A .tmp whose rows were committed as deleted is renamed; any other .tmp is a leftover."""
        if not self.db.folder.is_dir():
            return
        for tmp in sorted(self.db.folder.glob("*" + jsonl.TMP_SUFFIX)):
            final = tmp.with_name(tmp.name[: -len(jsonl.TMP_SUFFIX)])
            entry = self.manifest.get(final.name)
            if entry and not final.exists() and tmp.stat().st_size == entry["bytes"]:
                jsonl.publish(final)
                self.report.notes.append(f"finished renaming {final.name} (an earlier run stopped after its commit)")
            else:
                tmp.unlink()
                self.report.notes.append(f"removed {tmp.name} left by an interrupted run (its rows are still in the database)")

    def _check(self) -> None:
        """Refuse to touch a database whose archive or watermark does not add up."""
        folder, problems = self.db.folder, self.report.problems
        for name, entry in sorted(self.manifest.items()):
            path = folder / name
            tmp = path.with_name(name + jsonl.TMP_SUFFIX)
            if not path.exists() and tmp.exists() and tmp.stat().st_size == entry["bytes"]:
                continue  # committed, only the rename is pending (done by the next real run)
            if not path.exists():
                problems.append(f"{path} is missing, but {self.db.path.name} recorded it as archived "
                                f"({plural(entry['rows'], 'row')}, {plural(entry['bytes'], 'byte')}) "
                                "and no longer has those rows. "
                                "Restore the file from a backup; nothing more is archived from this database until then.")
            elif path.stat().st_size != entry["bytes"] or jsonl.is_truncated(path):
                problems.append(f"{path} is {path.stat().st_size} bytes but {entry['bytes']} were written when it "
                                f"was archived (truncated or edited), and its {plural(entry['rows'], 'row')} are no longer in "
                                f"{self.db.path.name}. Restore it from a backup; nothing more is archived from this "
                                "database until then.")
        if self.wm_end is None or self.repair:
            return
        strays, oldest = self.db.count(self.wm_end, f"{self.db.keep_sql} AND NOT {self.db.late_sql}")
        if strays and oldest is not None:
            problems.append(
                f"{self.db.path.name}: its watermark {WATERMARK} = {self.watermark}, yet {plural(strays, 'row')} are older "
                f"(oldest on {day_str(int(oldest) // DAY_MS)}): they were never archived (watermark edited, or rows "
                "written with old timestamps). Nothing was deleted from it. Run `nerve archive --repair` to move "
                f"them into part files ({day_str(int(oldest) // DAY_MS)}.2.jsonl …)."
            )

    # -- moving ------------------------------------------------------------------
    def execute(self, ticker: Ticker) -> None:
        if not self.report.problems:
            with self.guard():
                self._execute(ticker)

    def _execute(self, ticker: Ticker) -> None:
        for day, _ in sorted(self.late_days.items()):
            self._move(day, self.late_sql(), self._part_name(day_str(day)), ticker, advance=False)
        days = sorted(self.new_days)
        if days and self.db.rewrite_fits(sum(self.new_days.values())) and self._move_all(days, ticker):
            days = []
        for day in days:
            if self._move(day, self.db.keep_sql, self._day_name(day_str(day)), ticker, advance=True) is None:
                return  # the day would not hold still: stop here, the watermark stays before it
        self._advance_watermark()

    def _day_name(self, day: str) -> str:
        base = jsonl.file_name(day)
        return base if base not in self.manifest else self._part_name(day)

    def _part_name(self, day: str) -> str:
        parts = [p.part for p in jsonl.list_files(self.db.folder, day) if p.day == day]
        parts += [p[1] for p in map(jsonl.parse_name, self.manifest) if p and p[0] == day]
        return jsonl.file_name(day, max(parts + [1]) + 1)

    def _move(self, day: int, extra: str, name: str, ticker: Ticker, *, advance: bool) -> int | None:
        """Export, delete and commit one day's selection; None if it kept changing."""
        db, path = self.db, self.db.folder / name
        lo, hi = day * DAY_MS, (day + 1) * DAY_MS
        for _ in range(RETRIES):
            rows, size = jsonl.write_tmp(path, db.lines(lo, hi, extra))
            self.crash.point("exported")
            db.conn.execute("BEGIN IMMEDIATE")
            deleted = db.delete(lo, hi, extra)
            if deleted != rows:  # rows changed between export and delete: redo the day
                db.conn.execute("ROLLBACK")
                continue
            if rows:
                db.set_meta(FILE_KEY + name, f'{{"rows": {rows}, "bytes": {size}}}')
                self.manifest[name] = {"rows": rows, "bytes": size}
            if advance:
                db.set_meta(WATERMARK, day_str(day))
            self.crash.point("deleted")
            db.conn.execute("COMMIT")
            self.crash.point("committed")
            if rows:
                jsonl.publish(path)
                self.report.files.append(name)
            else:
                path.with_name(name + jsonl.TMP_SUFFIX).unlink()
            self.crash.point("published")
            if advance:
                self.watermark = self.report.watermark_after = day_str(day)
            self.report.rows += rows
            self.report.days.append(day_str(day) if advance else f"{day_str(day)} (late rows, {name})")
            ticker.tick(db.label, day_str(day), rows)
            return rows
        path.with_name(name + jsonl.TMP_SUFFIX).unlink(missing_ok=True)
        self.report.problems.append(f"rows of {day_str(day)} in {db.path.name} kept changing while being archived; left in place")
        return None

    def _move_all(self, days: list[int], ticker: Ticker) -> bool:
        """Move every day at once when most of the table leaves: the same steps as _move, in one transaction.

        Each day is exported to its .tmp (fsynced) first; then one transaction deletes them all, by
        rewriting the table (ArchiveDb.delete_by_rewrite), records every file and advances the watermark
        to the last day; then the files are renamed. A crash before the commit leaves every row in the
        database and only uncommitted .tmp files; after it, committed ones. False (nothing changed) if the
        rows kept changing: the caller then moves the days one at a time.
        """
        db, extra = self.db, self.db.keep_sql
        lo, hi = days[0] * DAY_MS, (days[-1] + 1) * DAY_MS
        names = [self._day_name(day_str(day)) for day in days]
        ticked: set[int] = set()
        for _ in range(RETRIES):
            written = []
            for day, name in zip(days, names):
                lines = db.lines(day * DAY_MS, (day + 1) * DAY_MS, extra)
                rows, size = jsonl.write_tmp(db.folder / name, lines, sync=False)
                written.append((day, name, rows, size))
                if day not in ticked:  # progress shows the export, the long part
                    ticked.add(day)
                    ticker.tick(db.label, day_str(day), rows)
            jsonl.sync_tmp(db.folder / name for name in names)
            self.crash.point("exported")
            db.conn.execute("BEGIN IMMEDIATE")
            if db.delete_by_rewrite(lo, hi, extra) != sum(rows for _, _, rows, _ in written):
                db.conn.execute("ROLLBACK")  # rows changed between export and delete: export again
                continue
            for _, name, rows, size in written:
                if rows:
                    db.set_meta(FILE_KEY + name, f'{{"rows": {rows}, "bytes": {size}}}')
                    self.manifest[name] = {"rows": rows, "bytes": size}
            db.set_meta(WATERMARK, day_str(days[-1]))
            self.crash.point("deleted")
            db.conn.execute("COMMIT")
            self.crash.point("committed")
            for day, name, rows, _ in written:
                if rows:
                    jsonl.publish(db.folder / name, sync=False)  # a rename lost to a power cut is redone
                    self.report.files.append(name)
                else:
                    (db.folder / (name + jsonl.TMP_SUFFIX)).unlink()
                self.crash.point("published")
                self.report.rows += rows
                self.report.days.append(day_str(day))
            jsonl.fsync_dir(db.folder)
            self.watermark = self.report.watermark_after = day_str(days[-1])
            return True
        for name in names:
            (db.folder / (name + jsonl.TMP_SUFFIX)).unlink(missing_ok=True)
        return False

    def _advance_watermark(self) -> None:
        """Empty days up to the cut-off count as archived too, so the next run starts after them."""
        target = day_str(self.last_day)
        if self.watermark is not None and self.watermark >= target:
            return
        if self.watermark is None and not self.report.rows:
            return  # never archived anything: no reason to start a watermark
        self.db.conn.execute("BEGIN IMMEDIATE")
        self.db.set_meta(WATERMARK, target)
        self.db.conn.execute("COMMIT")
        self.watermark = self.report.watermark_after = target

    def finish(self, vacuum: bool) -> None:
        try:
            if vacuum and self.report.rows:
                self.crash.point("vacuum")
                try:
                    self.db.vacuum()
                except Exception as exc:  # a busy engine can hold the lock past busy_timeout
                    self.report.notes.append(f"VACUUM skipped: {exc}")
                self.crash.point("vacuumed")
            self.report.bytes_after = self.db.size()
        finally:
            self.db.close()


class _Unreadable(DbRun):
    """A database that could not even be opened: reported, never touched."""

    def __init__(self, label: str, path: Path, folder: Path, problem: str) -> None:
        self.report = DbReport(label=label, path=path, folder=folder, watermark_before=None, watermark_after=None)
        self.report.problems.append(problem)
        self.late_days, self.new_days = {}, {}

    def plan_only(self) -> DbReport:
        return self.report

    def prepare(self) -> None:
        pass

    def execute(self, ticker: Ticker) -> None:
        pass

    def finish(self, vacuum: bool) -> None:
        pass
