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

import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import orjson

from nerve_cli.store.jsonl import encode
from nerve_cli.store.logs import LIVE_STATUSES, log_row, parse_payload
from nerve_cli.store.sqlitefile import BUSY_TIMEOUT_MS, check_file

DAY_MS = 86_400_000
WATERMARK = "archived_up_to"
FILE_KEY = "archive_file:"
SENSE_META = "_nerve_meta"
BLOCK_ROWS = 2048  # log lines fetched and written at once

# A log row's archive line as SQLite builds it, in C: the same JSON as encode(log_row(row)), keys in the
# same order, the payload as stored (minified; the kernel stores it as orjson wrote it). `time` is the
# row's ISO time from :date (the day being exported) and integer arithmetic on ts - :lo, ts in that day.
_LOG_LINE = (
    "json_object('id', id, 'source', source, 'type', type, 'ref_id', ref_id, 'payload', json(payload), 'ts', ts, "
    "'time', printf('%sT%02d:%02d:%02d.%03dZ', :date, (ts - :lo) / 3600000, (ts - :lo) / 60000 % 60, "
    "(ts - :lo) / 1000 % 60, (ts - :lo) % 1000))"
)
# Rows whose line SQLite builds: an integer ts, and a payload that is JSON (SQLite's reading) and short
# enough that orjson reads it at any nesting. Every other row (a payload that is not JSON or is a BLOB, a
# fractional ts) is encoded in Python from log_row, as before; so is the rest of a day after a BLOB in
# source, type or ref_id, which json_object refuses.
_SQLITE_BUILDS = (
    "typeof(ts) = 'integer' AND (payload IS NULL OR (typeof(payload) = 'text' AND length(payload) < 300 "
    "AND json_valid(payload)))"
)
# Where SQLite's JSON and orjson's part: escapes that may be lone surrogates, and numbers that overflow a
# double (an exponent of two digits or more, or with a sign; under 300 characters a shorter one cannot).
# Searched in each block with digits and + folded to 0 and E to e, so one rare literal finds every such
# exponent; a line holding either is encoded in Python (a false alarm in a string costs only that).
_FOLD = bytes.maketrans(b"123456789+E", b"0000000000e")
_EXPONENT = re.compile(rb"e00")
_U_ESCAPE = re.compile(rb"\\u")
_LOG_COLUMNS = "id, source, type, ref_id, payload, ts"


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
        if path.is_file() and path.stat().st_size == 0:
            # opened for writing, an empty file gets a fresh header: a truncated database would then read as a
            # new, empty one (a listener's cursors gone, every event delivered again). Left for its owner to refuse.
            raise sqlite3.DatabaseError(f"{path} is empty (0 bytes): it was truncated; not archived")
        check_file(path)
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
        live = c.execute("SELECT 1 FROM temp.nerve_live LIMIT 1").fetchone()
        # with no live thread every row may go: the plain "1" lets a day's count use the time index alone
        self.keep_sql = "(ref_id IS NULL OR ref_id NOT IN (SELECT run_id FROM temp.nerve_live))" if live else "1"
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
        """The selected rows as JSONL, streamed from a cursor: blocks of whole lines."""
        for table, column in self.tables:
            if self.is_logs:
                yield from self._log_lines(lo, hi, extra)
                continue
            order = "id" if table == "_signals" else q(column)
            cur = self.conn.execute(
                f"SELECT * FROM {q(table)} WHERE {self._where(column, extra)} ORDER BY {order}", (lo, hi)
            )
            if table == "_signals":
                # payloads decoded as `sense show` and `logs --json` show them; the marker tells readers so
                names = [d[0] for d in cur.description]
                for row in cur:
                    data = dict(zip(names, row))
                    data["payload"] = parse_payload(data.get("payload"))
                    for added in ("schema_version", "hash"):  # written only when a sense asks: an archive as before
                        if data.get(added) is None:
                            data.pop(added, None)
                    yield encode({"table": table, "row": data, "decoded": ["payload"]})
            else:
                names = [d[0] for d in cur.description]
                for row in cur:
                    yield encode({"table": table, "row": dict(zip(names, row))})

    def _log_lines(self, lo: int, hi: int, extra: str) -> Iterator[bytes]:
        """One day of logs (hi - lo is at most a day) as blocks of lines, in id order, most built by SQLite."""
        if hi - lo > DAY_MS or lo % DAY_MS:
            raise ValueError(f"log lines are exported one UTC day at a time, not [{lo}, {hi})")
        params = {"lo": lo, "hi": hi, "date": day_str(lo // DAY_MS)}
        # ids grow with time, so a day's rows are usually one id range: read it in id order without a sort
        first, last, count = self.conn.execute(
            "SELECT min(id), max(id), count(*) FROM logs WHERE ts >= :lo AND ts < :hi", params).fetchone()
        if not count:
            return
        if last - first < 2 * count:
            where = f"id BETWEEN {int(first)} AND {int(last)} AND +ts >= :lo AND +ts < :hi AND {extra}"
        else:  # a day interleaved with many later rows: go through the time index
            where = f"ts >= :lo AND ts < :hi AND {extra}"
        cur = self.conn.execute(
            f"SELECT CASE WHEN {_SQLITE_BUILDS} THEN {_LOG_LINE} END, id FROM logs WHERE {where} ORDER BY id", params)
        done = None  # the last id written
        try:
            while rows := cur.fetchmany(BLOCK_ROWS):
                lines = [line for line, _ in rows]
                lines.append("")
                block = "\n".join(lines).encode() if None not in lines else b""
                if not block or _suspect(block):
                    lines = [line if line is not None and not _suspect(line.encode()) else self._log_line(id_)
                             for line, id_ in rows]
                    lines.append("")
                    block = "\n".join(lines).encode()
                done = rows[-1][1]
                yield block
        except sqlite3.OperationalError:  # "JSON cannot hold BLOB values": the rest of the day in Python
            after = "" if done is None else f" AND id > {int(done)}"
            rest = self.conn.execute(f"SELECT {_LOG_COLUMNS} FROM logs WHERE {where}{after} ORDER BY id", params)
            for row in rest:
                yield encode(log_row(row))

    def _log_line(self, id_: int) -> str:
        """A row's line encoded in Python (the path every row took before SQLite built most of them)."""
        row = self.conn.execute(f"SELECT {_LOG_COLUMNS} FROM logs WHERE id = ?", (id_,)).fetchone()
        return encode(log_row(row))[:-1].decode()

    def delete(self, lo: int, hi: int, extra: str) -> int:
        deleted = 0
        for table, column in self.tables:
            cur = self.conn.execute(f"DELETE FROM {q(table)} WHERE {self._where(column, extra)}", (lo, hi))
            deleted += cur.rowcount
        return deleted

    def rewrite_fits(self, leaving: int) -> bool:
        """Whether deleting `leaving` rows is cheaper by rewriting the table (logs.db only; see delete_by_rewrite).

        It is when at most as many rows stay as leave: copying the rows that stay costs about twice a
        row's delete, and emptying the table costs almost nothing.
        """
        if not self.is_logs or self.tables != [("logs", "ts")]:
            return False
        if self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'logs'").fetchone():
            return False  # a trigger would fire for every row emptied and put back
        total = self.conn.execute("SELECT count(*) FROM logs").fetchone()[0]
        return 0 < leaving and total - leaving <= leaving

    def delete_by_rewrite(self, lo: int, hi: int, extra: str) -> int:
        """Delete what delete(lo, hi, extra) would, inside the caller's transaction, without a delete per row.

        The rows that stay are copied aside, the table is emptied at once (SQLite frees its pages without
        visiting every row and index entry) and the copies go back with their own ids; the schema, the
        indexes and the AUTOINCREMENT sequence stay as they were. Freed pages are not zeroed here
        (secure_delete FAST): their rows are in the archive files, and VACUUM rewrites the file.
        Returns the number of rows deleted.
        """
        c = self.conn
        leaving = f"coalesce({self._where('ts', extra)}, 0)"
        secure = c.execute("PRAGMA secure_delete").fetchone()[0]
        c.execute("PRAGMA secure_delete = FAST")
        try:
            total = c.execute("SELECT count(*) FROM logs").fetchone()[0]
            c.execute("DROP TABLE IF EXISTS temp.nerve_staying")
            c.execute(f"CREATE TEMP TABLE nerve_staying AS SELECT * FROM logs WHERE NOT {leaving}", (lo, hi))
            c.execute("DELETE FROM logs")
            staying = c.execute("INSERT INTO logs SELECT * FROM temp.nerve_staying").rowcount
            c.execute("DROP TABLE temp.nerve_staying")
        finally:
            c.execute(f"PRAGMA secure_delete = {('OFF', 'ON', 'FAST')[secure]}")
        return total - staying

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


def _suspect(lines: bytes) -> bool:
    """Whether SQLite-built lines may hold JSON orjson reads otherwise than SQLite did (see _FOLD)."""
    if b"\\" in lines and _U_ESCAPE.search(lines):
        return True
    return _EXPONENT.search(lines.translate(_FOLD)) is not None


def day_str(index: int) -> str:
    """Day number since the epoch → YYYY-MM-DD (UTC)."""
    return datetime.fromtimestamp(index * 86400, tz=timezone.utc).strftime("%Y-%m-%d")


def day_index(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp()) // 86400
