"""What this host has sent to its fleet: the outbox, read from the published sources' own committed rows.

The outbox is not a copy of anything. A published sense's signals are its
`_signals` rows (committed by its worker before the kernel hears of them); a
published channel's emits are its rows in `data/events.db` whose `origin` is
empty (emitted here, not received from the fleet). `data/fleet.db` keeps, per
published source, the id of the last row the NATS server acknowledged; every
row above it is the outbox, sent in id order. A row is marked sent (the id
moves) only after the server's acknowledgement, so a crash or an outage at any
point sends it again, and the server's de-duplication by message id (then the
receiver's, by event key) drops the second copy.

A source database that was deleted and rebuilt starts its ids again: an id
above the source's highest ever (`sqlite_sequence`) means exactly that, and
sending starts again from its first row. Every method runs in one thread at a
time (the kernel's fleet thread).
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.store.events import BUSY_TIMEOUT_MS, Cursor, connect_readonly, head, resume_after, source_identity, source_path
from nerve_cli.store.sqlitefile import check_file
from nerve_cli.vocab.sources import SourceKind

SCHEMA = ("CREATE TABLE IF NOT EXISTS sent (kind TEXT NOT NULL, name TEXT NOT NULL, last_id INTEGER NOT NULL, "
          "ts INTEGER NOT NULL, PRIMARY KEY (kind, name))")
Source = tuple[str, str]  # (kind, name): ("sense", "disk-usage") or ("channel", "deploys")


@dataclass(frozen=True)
class Row:
    """One committed signal or emit waiting to be sent."""

    id: int
    ts: int
    payload: str | bytes | None  # its JSON (text as stored, or bytes handed over by the kernel); None: no payload
    traceparent: str | None = None  # the W3C trace context it continues (handed over by the kernel, when tracing)


class OutboxStore:
    def __init__(self, data: Path) -> None:
        self.data = Path(data)
        self.path = self.data / "fleet.db"
        self.data.mkdir(parents=True, exist_ok=True)
        check_file(self.path)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute(SCHEMA)
        if "identity" not in {row[1] for row in self.conn.execute("PRAGMA table_info(sent)")}:
            self.conn.execute("ALTER TABLE sent ADD COLUMN identity TEXT")  # a fleet.db from before identities
        self._readers: dict[Path, tuple[tuple[int, int], sqlite3.Connection]] = {}

    def sent(self) -> dict[Source, Cursor]:
        """Each published source's sent mark: the last id acknowledged, in the source database `identity`."""
        return {(k, n): Cursor(i, ident, ts) for k, n, i, ident, ts in
                self.conn.execute("SELECT kind, name, last_id, identity, ts FROM sent")}

    def mark_sent(self, source: Source, mark: Cursor) -> None:
        self.conn.execute("INSERT INTO sent (kind, name, last_id, ts, identity) VALUES (?, ?, ?, ?, ?) "
                          "ON CONFLICT(kind, name) DO UPDATE SET last_id = excluded.last_id, ts = excluded.ts, "
                          "identity = excluded.identity",
                          (*source, mark.last_id, time.time_ns() // 1_000_000, mark.identity))

    def current(self, source: Source, mark: Cursor | None) -> Cursor:
        """The sent mark to read from now: `mark`, or the start of a source database rebuilt since (another
        identity, or ids that started again), in that database's identity."""
        conn = self._reader(source)
        if conn is None:
            return mark or Cursor(0)
        identity = source_identity(conn)
        if mark is None:
            return Cursor(0, identity)
        after, jump = resume_after(conn, source[0], source[1], mark, identity)
        if jump is not None:  # rebuilt, or an earlier copy put back: what it holds past the mark's time is new
            return Cursor(after, identity)
        return mark if mark.identity is not None or identity is None else Cursor(mark.last_id, identity)

    def read(self, source: Source, after: int, limit: int, max_bytes: int) -> list[Row]:
        """Up to `limit` rows above `after`, oldest first, stopping once `max_bytes` of payload were read
        (the first row always comes, whatever its size)."""
        conn = self._reader(source)
        if conn is None:
            return []
        kind, name = source
        out: list[Row] = []
        size = 0
        try:
            if kind == SourceKind.CHANNEL:
                sql = ("SELECT id, ts, payload FROM events WHERE channel = ? AND id > ? AND origin IS NULL "
                       "ORDER BY id LIMIT ?")
                cursor = conn.execute(sql, (name, after, limit))
            else:
                sql = "SELECT id, ts, payload FROM _signals WHERE id > ? ORDER BY id LIMIT ?"
                cursor = conn.execute(sql, (after, limit))
            for row_id, ts, payload in cursor:
                out.append(Row(row_id, ts, payload))
                size += len(payload or "")
                if size >= max_bytes:
                    break
        except sqlite3.OperationalError:  # its table does not exist yet (a database being created): nothing committed
            return []
        return out

    def depth(self, source: Source, after: int) -> int:
        """How many rows above `after` wait to be sent."""
        conn = self._reader(source)
        return 0 if conn is None else _count_above(conn, source, after)

    def _reader(self, source: Source) -> sqlite3.Connection | None:
        """A read-only connection to the source's database, opened again when the file was replaced."""
        path = source_path(self.data, *source)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return None
        identity = (stat.st_dev, stat.st_ino)
        known = self._readers.get(path)
        if known is not None and known[0] == identity:
            return known[1]
        if known is not None:
            known[1].close()
        conn = connect_readonly(path)
        self._readers[path] = (identity, conn)
        return conn

    def close(self) -> None:
        for _, conn in self._readers.values():
            conn.close()
        self._readers.clear()
        self.conn.close()


def _count_above(conn: sqlite3.Connection, source: Source, after: int) -> int:
    kind, name = source
    try:
        if kind == SourceKind.CHANNEL:
            sql = "SELECT count(*) FROM events WHERE channel = ? AND id > ? AND origin IS NULL"
            return int(conn.execute(sql, (name, after)).fetchone()[0])
        return int(conn.execute("SELECT count(*) FROM _signals WHERE id > ?", (after,)).fetchone()[0])
    except sqlite3.OperationalError:  # its table does not exist yet: nothing committed
        return 0


def outbox_from_files(data: Path, sources: list[Source]) -> dict[Source, dict[str, int | None]]:
    """Read-only, with no engine: for each published source, its sent mark and how many rows wait above it."""
    data = Path(data)
    marks: dict[Source, tuple[int, int]] = {}
    if (data / "fleet.db").exists():
        conn = connect_readonly(data / "fleet.db")
        try:
            marks = {(k, n): (i, t) for k, n, i, t in conn.execute("SELECT kind, name, last_id, ts FROM sent")}
        except sqlite3.OperationalError:
            pass
        finally:
            conn.close()
    out: dict[Source, dict[str, int | None]] = {}
    for source in sources:
        sent, sent_ts = marks.get(source, (0, None))
        path = source_path(data, *source)
        waiting = 0
        if path.exists():
            conn = connect_readonly(path)
            try:
                waiting = _count_above(conn, source, 0 if sent > head(conn, source[0]) else sent)
            finally:
                conn.close()
        out[source] = {"sent_id": sent or None, "sent_ts": sent_ts, "waiting": waiting}
    return out
