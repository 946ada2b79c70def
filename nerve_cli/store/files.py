"""File reflexes in data/events.db: the change events their senses receive, and the last state seen of each file.

- `file_events(id, sense, pattern, payload, ts)`: one row per changed path,
  payload `{"path", "change", "size", "mtime_ms"}` (change: added, modified,
  deleted). A listener reads them as events of kind "file" whose source is the
  pattern, with its cursor in its own database like any other source.
- `file_state(sense, pattern, path, mtime_ns, size)`: what each pattern's files
  looked like when last recorded. A change is a difference from it, so a file
  changed while no engine ran is one when the next engine compares (`record`).
- `file_watches(sense, pattern, since)`: patterns whose files were recorded once
  (their baseline): the first look at a pattern records what is there and
  reports nothing, so a new reflex over a big tree does not fire for every file.

Events and state move in one transaction: a killed engine either stored a
change and its new state, or neither (and the next start finds it again).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

import orjson

FILE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS file_events (id INTEGER PRIMARY KEY AUTOINCREMENT, sense TEXT NOT NULL, "
    "pattern TEXT NOT NULL, payload TEXT NOT NULL, ts INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS idx_file_events_source ON file_events(sense, pattern, id)",
    "CREATE INDEX IF NOT EXISTS idx_file_events_ts ON file_events(ts)",
    "CREATE TABLE IF NOT EXISTS file_state (sense TEXT NOT NULL, pattern TEXT NOT NULL, path TEXT NOT NULL, "
    "mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (sense, pattern, path)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS file_watches (sense TEXT NOT NULL, pattern TEXT NOT NULL, since INTEGER NOT NULL, "
    "PRIMARY KEY (sense, pattern)) WITHOUT ROWID",
    "INSERT OR IGNORE INTO _nerve_archive (table_name, time_column) VALUES ('file_events', 'ts')",
)

Stat = tuple[int, int]  # (mtime_ns, size) of a regular file


@dataclass(frozen=True)
class FileChange:
    path: str
    change: str  # added | modified | deleted
    size: int | None = None
    mtime_ms: int | None = None

    def payload(self) -> dict:
        return {"path": self.path, "change": self.change, "size": self.size, "mtime_ms": self.mtime_ms}


@dataclass(frozen=True)
class Look:
    """What was found of one pattern's files: `seen` (path → stat, None for gone), and `whole` when it is a
    full scan (a recorded path it does not mention is gone) rather than the paths a watcher named. `gone_dirs`:
    folders that disappeared, whose recorded files are gone with them."""

    seen: Mapping[str, Stat | None]
    whole: bool = False
    gone_dirs: tuple[str, ...] = ()


def record(conn: sqlite3.Connection, sense: str, pattern: str, look: Look, ts: int | None = None) -> list[FileChange]:
    """Inside the caller's transaction: compare `look` with the recorded state, store one event per changed path
    and the new state. The first look at a pattern is its baseline: recorded, nothing reported."""
    ts = ts if ts is not None else time.time_ns() // 1_000_000
    baseline = conn.execute("SELECT 1 FROM file_watches WHERE sense = ? AND pattern = ?", (sense, pattern)).fetchone()
    known = _known(conn, sense, pattern, look)
    changes: list[FileChange] = []
    for path, stat in sorted(look.seen.items()):
        before = known.get(path)
        if stat is None:
            if before is not None:
                changes.append(FileChange(path, "deleted"))
        elif before is None:
            changes.append(FileChange(path, "added", stat[1], stat[0] // 1_000_000))
        elif before != stat:
            changes.append(FileChange(path, "modified", stat[1], stat[0] // 1_000_000))
    gone = [p for p in known if p not in look.seen and (look.whole or _inside(p, look.gone_dirs))]
    changes += [FileChange(p, "deleted") for p in sorted(gone)]
    deleted = [(sense, pattern, c.path) for c in changes if c.change == "deleted"]
    conn.executemany("DELETE FROM file_state WHERE sense = ? AND pattern = ? AND path = ?", deleted)
    conn.executemany("INSERT OR REPLACE INTO file_state (sense, pattern, path, mtime_ns, size) VALUES (?, ?, ?, ?, ?)",
                     [(sense, pattern, p, s[0], s[1]) for p, s in look.seen.items() if s is not None and known.get(p) != s])
    if not baseline:  # only a whole scan sets the baseline; what a watcher saw before it is state, not news
        if look.whole:
            conn.execute("INSERT INTO file_watches (sense, pattern, since) VALUES (?, ?, ?)", (sense, pattern, ts))
        return []
    conn.executemany("INSERT INTO file_events (sense, pattern, payload, ts) VALUES (?, ?, ?, ?)",
                     [(sense, pattern, orjson.dumps(c.payload()).decode(), ts) for c in changes])
    return changes


def _known(conn: sqlite3.Connection, sense: str, pattern: str, look: Look) -> dict[str, Stat]:
    """The recorded state `look` is compared with: all of it for a whole scan, else the rows of the paths it
    names and of everything under the folders it saw go."""
    where = "sense = ? AND pattern = ?"
    if look.whole:
        rows = conn.execute(f"SELECT path, mtime_ns, size FROM file_state WHERE {where}", (sense, pattern))
        return {p: (m, s) for p, m, s in rows}
    out: dict[str, Stat] = {}
    for path in look.seen:
        row = conn.execute(f"SELECT mtime_ns, size FROM file_state WHERE {where} AND path = ?",
                           (sense, pattern, path)).fetchone()
        if row is not None:
            out[path] = (row[0], row[1])
    for folder in look.gone_dirs:
        prefix = folder.rstrip("/") + "/"  # paths under it sort between "folder/" and "folder0" ('0' follows '/')
        rows = conn.execute(f"SELECT path, mtime_ns, size FROM file_state WHERE {where} AND path >= ? AND path < ?",
                            (sense, pattern, prefix, prefix[:-1] + "0"))
        out.update({p: (m, s) for p, m, s in rows})
    return out


def _inside(path: str, folders: Iterable[str]) -> bool:
    return any(path.startswith(f.rstrip("/") + "/") for f in folders)
