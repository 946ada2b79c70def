"""data/notify.db: where each source's signals were read up to, and the notifications still to send.

One transaction takes a batch of signals: their notices go in the outbox (one
row per notice and target) and the source's cursor moves past them together,
so a signal is turned into notifications once, even when the engine is killed
between two batches. A row leaves the outbox when its target took it (a `sent`
row keeps the count); a try that failed sets when to try again.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import orjson

from nerve_cli.store.sqlitefile import open_reader, open_writer

SCHEMA = """
CREATE TABLE IF NOT EXISTS cursors (source TEXT PRIMARY KEY, last_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, rule TEXT NOT NULL, target TEXT NOT NULL,
  kind TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, run_id TEXT, created_ms INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, next_ms INTEGER NOT NULL, last_error TEXT);
CREATE TABLE IF NOT EXISTS sent (id INTEGER PRIMARY KEY AUTOINCREMENT, rule TEXT NOT NULL, kind TEXT NOT NULL,
  run_id TEXT, attempts INTEGER NOT NULL, created_ms INTEGER NOT NULL, sent_ms INTEGER NOT NULL);
"""
FIX = "delete it: notifications not yet sent are lost, and the sources are read from their ends again"


def target_key(url: str) -> str:
    """How an outbox row names its target: a digest, so a URL's secret is not copied into the file."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Pending:
    id: int
    rule: str
    target: str
    kind: str
    title: str
    body: str
    run_id: str | None
    attempts: int
    created_ms: int


class Outbox:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.new = not path.exists()
        self.conn = open_writer(path, fix=FIX)
        self.conn.executescript(SCHEMA)

    def cursor(self, source: str) -> int | None:
        row = self.conn.execute("SELECT last_id FROM cursors WHERE source = ?", (source,)).fetchone()
        return row[0] if row else None

    def state(self, key: str) -> object:
        row = self.conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def take(self, source: str, last_id: int, rows: list[tuple[str, str, str, str, str, str | None]], now_ms: int,
             state: dict[str, object] | None = None) -> None:
        """In one transaction: the notices' rows (rule, target, kind, title, body, run_id), the cursor, the state."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany("INSERT INTO outbox (rule, target, kind, title, body, run_id, created_ms, next_ms) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [(*r, now_ms, now_ms) for r in rows])
            self.conn.execute("INSERT INTO cursors (source, last_id) VALUES (?, ?) ON CONFLICT(source) DO UPDATE "
                              "SET last_id = excluded.last_id", (source, last_id))
            for key, value in (state or {}).items():
                self.conn.execute("INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                                  "value = excluded.value", (key, orjson.dumps(value).decode()))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def due(self, now_ms: int, held: list[str], limit: int = 50) -> list[Pending]:
        """What is due now, oldest first, but for the rules in `held` (disabled: theirs wait)."""
        marks = ",".join("?" * len(held))
        return [Pending(*r) for r in self.conn.execute(
            "SELECT id, rule, target, kind, title, body, run_id, attempts, created_ms FROM outbox WHERE next_ms <= ? "
            f"AND rule NOT IN ({marks}) ORDER BY id LIMIT ?", (now_ms, *held, limit))]

    def next_due(self, held: list[str]) -> int | None:
        marks = ",".join("?" * len(held))
        row = self.conn.execute(f"SELECT MIN(next_ms) FROM outbox WHERE rule NOT IN ({marks})", held).fetchone()
        return row[0] if row and row[0] is not None else None

    def sent(self, item: Pending, now_ms: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))
        self.conn.execute("INSERT INTO sent (rule, kind, run_id, attempts, created_ms, sent_ms) VALUES (?, ?, ?, ?, ?, ?)",
                          (item.rule, item.kind, item.run_id, item.attempts + 1, item.created_ms, now_ms))
        self.conn.execute("COMMIT")

    def failed(self, item: Pending, next_ms: int, error: str) -> None:
        self.conn.execute("UPDATE outbox SET attempts = attempts + 1, next_ms = ?, last_error = ? WHERE id = ?",
                          (next_ms, error[:2000], item.id))

    def drop(self, item: Pending) -> None:
        self.conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))

    def counts(self) -> dict[str, dict[str, object]]:
        """rule → {"sent", "pending", "failing", "last_error"} as the file has them."""
        out: dict[str, dict[str, object]] = {}
        for rule, count in self.conn.execute("SELECT rule, COUNT(*) FROM sent GROUP BY rule"):
            out.setdefault(rule, {"sent": 0, "pending": 0, "failing": 0, "last_error": None})["sent"] = count
        for rule, count, failing, error in self.conn.execute(
                "SELECT rule, COUNT(*), SUM(attempts > 0), (SELECT last_error FROM outbox AS o2 WHERE o2.rule = "
                "outbox.rule AND last_error IS NOT NULL ORDER BY id DESC LIMIT 1) FROM outbox GROUP BY rule"):
            entry = out.setdefault(rule, {"sent": 0, "pending": 0, "failing": 0, "last_error": None})
            entry.update(pending=count, failing=failing or 0, last_error=error)
        return out

    def close(self) -> None:
        self.conn.close()


def last_signal_id(db: Path) -> int:
    """The newest `_signals` id of a built-in sense's database (0 when it has none yet)."""
    if not db.exists():
        return 0
    conn = open_reader(db, fix="the engine rebuilds it at its next start")
    try:
        row = conn.execute("SELECT MAX(id) FROM _signals").fetchone()
        return int(row[0] or 0)
    except sqlite3.OperationalError:  # no _signals yet
        return 0
    finally:
        conn.close()


def signals_after(db: Path, last_id: int, limit: int = 500) -> list[tuple[int, object]]:
    """(id, payload) of the `_signals` rows after `last_id`, oldest first."""
    if not db.exists():
        return []
    conn = open_reader(db, fix="the engine rebuilds it at its next start")
    try:
        return [(i, orjson.loads(p)) for i, p in conn.execute(
            "SELECT id, payload FROM _signals WHERE id > ? ORDER BY id LIMIT ?", (last_id, limit))]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
