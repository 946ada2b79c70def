"""What an archive run did (or, with --dry-run, would do), per database."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ProgressEvent:
    """Passed to the `progress` callback after each day is moved."""

    db: str
    day: str
    total_days: int
    total_rows: int
    days_done: int = 0
    rows_done: int = 0


@dataclass
class DbReport:
    label: str  # "logs" or "sense <name>"
    path: Path
    folder: Path
    watermark_before: str | None
    watermark_after: str | None
    rows: int = 0  # rows moved out of the database
    days: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    planned_rows: int = 0  # dry run: rows that would move
    planned_days: list[str] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0
    problems: list[str] = field(default_factory=list)  # this database was left untouched
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    def as_dict(self) -> dict:
        return {
            "database": self.label, "path": str(self.path), "folder": str(self.folder),
            "watermark_before": self.watermark_before, "watermark_after": self.watermark_after,
            "rows": self.rows, "days": self.days, "files": self.files,
            "planned_rows": self.planned_rows, "planned_days": self.planned_days,
            "bytes_before": self.bytes_before, "bytes_after": self.bytes_after, "bytes_freed": self.bytes_freed,
            "problems": self.problems, "notes": self.notes,
        }


@dataclass
class ArchiveReport:
    up_to: str  # the last whole UTC day old enough to archive
    dry_run: bool
    databases: list[DbReport] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(d.rows for d in self.databases)

    @property
    def problems(self) -> list[str]:
        return [f"{d.label}: {p}" for d in self.databases for p in d.problems]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"up_to": self.up_to, "dry_run": self.dry_run, "rows": self.rows,
                "ok": self.ok, "databases": [d.as_dict() for d in self.databases]}
