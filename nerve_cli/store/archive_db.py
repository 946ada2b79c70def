"""One database as the archiver sees it: its time-marked tables, watermark and file manifest.

logs.db keeps its bookkeeping in `meta`; a sense database keeps
the same keys in an archiver-owned table `_nerve_meta(key, value)`:
- `archived_up_to` = YYYY-MM-DD, every whole day up to it has been archived;
- `archive_file:<file name>` = {"rows": n, "bytes": b}, one per archive file
  whose rows were deleted, written in the same transaction as the delete.
  A file is *committed* iff it has this entry; the size lets a later run
  notice a truncated or edited file.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import orjson

from nerve_cli.store.jsonl import encode
from nerve_cli.store.logs import LIVE_STATUSES, log_row, parse_payload
from nerve_cli.store.sqlitefile import BUSY_TIMEOUT_MS

DAY_MS = 86_400_000
WATERMARK = "archived_up_to"
FILE_KEY = "archive_file:"
SENSE_META = "_nerve_meta"


def q(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class ArchiveDb:
    """A connection to one database plus what the archiver needs to know about it."""

    def __init__(self, label: str, path: Path, folder: Path, *, is_logs: bool) -> None:
        self.label = label
        self.path = path
        self.folder = folder
        self.is_logs = is_logs
        self.meta_table = "meta" if is_logs else SENSE_META
        self.notes: list[str] = []
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # our few commits must survive a power cut, not just a crash
        self.conn.execute("PRAGMA synchronous = FULL")
        self.tables = self._tables()
        self.keep_sql = "1"   # rows that may leave the database at all
        self.late_sql = "0"   # rows before the watermark that are expected there
        if is_logs:
            self._snapshot_threads()

    # -- discovery -----------------------------------------------------------
    def _exists(self, table: str) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self.conn.execute(sql, (table,)).fetchone() is not None

    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self.conn.execute(f"PRAGMA table_info({q(table)})")]

    def _tables(self) -> list[tuple[str, str]]:
        if self.is_logs:
            return [("logs", "ts")] if self._exists("logs") else []
        found = [("_signals", "ts")] if self._exists("_signals") else []
        if not self._exists("_nerve_archive"):
            return found
        for table, column in self.conn.execute("SELECT table_name, time_column FROM _nerve_archive ORDER BY table_name"):
            if table == "_signals":
                continue
            if not self._exists(table):
                self.notes.append(f"table {table!r} listed in _nerve_archive does not exist; skipped")
            elif column not in self._columns(table):
                self.notes.append(f"table {table!r} has no column {column!r} (from _nerve_archive); skipped")
            else:
                found.append((table, column))
        return found

    def _snapshot_threads(self) -> None:
        """Fix, for this run, which threads are live: their rows stay, whatever happens meanwhile."""
        c = self.conn
        c.execute("CREATE TEMP TABLE IF NOT EXISTS nerve_live (run_id TEXT PRIMARY KEY)")
        c.execute("CREATE TEMP TABLE IF NOT EXISTS nerve_done (run_id TEXT PRIMARY KEY)")
        if self._exists("workflow_runs"):
            marks = ",".join("?" * len(LIVE_STATUSES))
            c.execute("BEGIN")
            base = "SELECT run_id FROM workflow_runs WHERE run_id IS NOT NULL AND status"
            c.execute(f"INSERT OR IGNORE INTO temp.nerve_live {base} IN ({marks})", LIVE_STATUSES)
            c.execute(f"INSERT OR IGNORE INTO temp.nerve_done {base} NOT IN ({marks})", LIVE_STATUSES)
            c.execute("COMMIT")
        self.keep_sql = "(ref_id IS NULL OR ref_id NOT IN (SELECT run_id FROM temp.nerve_live))"
        # rows of a finished thread that were held back while it was live
        self.late_sql = "(ref_id IS NOT NULL AND ref_id IN (SELECT run_id FROM temp.nerve_done))"

    # -- bookkeeping -----------------------------------------------------------
    def ensure_meta(self) -> None:
        if not self.is_logs:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {SENSE_META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def _meta_rows(self, where: str, params: tuple) -> list[tuple[str, str]]:
        if not self._exists(self.meta_table):
            return []
        return self.conn.execute(f"SELECT key, value FROM {self.meta_table} WHERE {where}", params).fetchall()

    def watermark(self) -> str | None:
        rows = self._meta_rows("key = ?", (WATERMARK,))
        return rows[0][1] if rows else None

    def manifest(self) -> dict[str, dict]:
        rows = self._meta_rows("key LIKE ?", (FILE_KEY + "%",))
        return {key[len(FILE_KEY):]: orjson.loads(value) for key, value in rows}

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            f"INSERT INTO {self.meta_table} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- selections: [lo, hi) in ms plus an SQL condition -----------------------
    def _where(self, column: str, extra: str) -> str:
        return f"{q(column)} >= ? AND {q(column)} < ? AND {extra}"

    def plan(self, lo: int, hi: int, extra: str) -> dict[int, int]:
        """day index → number of rows selected, across all tables."""
        days: dict[int, int] = {}
        for table, column in self.tables:
            sql = (
                f"SELECT CAST({q(column)} AS INTEGER) / {DAY_MS} AS d, COUNT(*) FROM {q(table)} "
                f"WHERE {self._where(column, extra)} GROUP BY d"
            )
            for day, count in self.conn.execute(sql, (lo, hi)):
                days[day] = days.get(day, 0) + count
        return days

    def lines(self, lo: int, hi: int, extra: str) -> Iterator[bytes]:
        """The selected rows as JSONL lines, streamed from a cursor."""
        for table, column in self.tables:
            order = "id" if table in ("logs", "_signals") else q(column)
            cur = self.conn.execute(
                f"SELECT * FROM {q(table)} WHERE {self._where(column, extra)} ORDER BY {order}", (lo, hi)
            )
            if self.is_logs:
                for row in cur:
                    yield encode(log_row(row))
            elif table == "_signals":
                # payloads decoded as `sense show` and `logs --json` show them; the marker tells readers so
                names = [d[0] for d in cur.description]
                for row in cur:
                    data = dict(zip(names, row))
                    data["payload"] = parse_payload(data.get("payload"))
                    yield encode({"table": table, "row": data, "decoded": ["payload"]})
            else:
                names = [d[0] for d in cur.description]
                for row in cur:
                    yield encode({"table": table, "row": dict(zip(names, row))})

    def delete(self, lo: int, hi: int, extra: str) -> int:
        deleted = 0
        for table, column in self.tables:
            cur = self.conn.execute(f"DELETE FROM {q(table)} WHERE {self._where(column, extra)}", (lo, hi))
            deleted += cur.rowcount
        return deleted

    def count(self, hi: int, extra: str) -> tuple[int, int | None]:
        """(rows, oldest ts) of rows older than `hi` matching `extra`."""
        total, oldest = 0, None
        for table, column in self.tables:
            sql = f"SELECT COUNT(*), MIN({q(column)}) FROM {q(table)} WHERE {q(column)} < ? AND {extra}"
            n, low = self.conn.execute(sql, (hi,)).fetchone()
            total += n
            if low is not None:
                oldest = low if oldest is None else min(oldest, low)
        return total, oldest

    def size(self) -> int:
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def vacuum(self) -> None:
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.conn.close()


def day_str(index: int) -> str:
    """Day number since the epoch → YYYY-MM-DD (UTC)."""
    return datetime.fromtimestamp(index * 86400, tz=timezone.utc).strftime("%Y-%m-%d")


def day_index(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()) // 86400
