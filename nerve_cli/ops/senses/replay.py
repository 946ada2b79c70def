"""`nerve sense replay NAME --source S --from ID|TIME`: move a listener's cursor back, so a projection can be rebuilt.

The cursor of a listener on one source is a row of its own `_nerve_cursors`
(the id of the last event it consumed). Replaying from event id N (or from the
first event stored at or after a time) sets it to N - 1 in one transaction, so
its next compute receives every event from there on again, in order, in the
usual batches. The move is logged (`system/cursor_moved`, with the ids before
and after and who asked), and a running engine runs the listener at once
(reason `replay`); without one, the next start delivers them (reason
`backlog`).

Only backwards: a `--from` beyond the cursor would skip events nobody has
seen, and is refused. Events already archived are not in the source any more:
the answer counts them apart and they are not delivered again.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nerve_cli.config.load import load_config
from nerve_cli.contract import VERSION
from nerve_cli.contract.times import parse_instant
from nerve_cli.errors import EngineNotRunning, NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.kernel.core.listeners import all_sources
from nerve_cli.ops.client import request
from nerve_cli.schema.apply import ensure_engine_tables
from nerve_cli.store.archive_db import SENSE_META, WATERMARK
from nerve_cli.store.events import (
    SOURCE_TABLES,
    Cursor,
    connect_readonly,
    head,
    identity_of,
    now_ms,
    read_cursors,
    source_path,
    write_cursors,
)
from nerve_cli.store.logs import LogStore
from nerve_cli.store.sqlitefile import check_file, immediate
from nerve_cli.vocab import logrows

BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class Replay:
    sense: str
    source: str
    kind: str  # sense | channel | file
    cursor_before: int
    cursor_after: int
    events: int  # events beyond the new cursor that the listener will receive (again, or for the first time)
    oldest_held: int | None  # the oldest id the source still holds: older ones were archived, not delivered again
    dry_run: bool
    delivered: str | None  # "now" (an engine runs it at once), "at next start", None for a dry run

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "sense": self.sense, "source": self.source, "kind": self.kind,
                "cursor_before": self.cursor_before, "cursor_after": self.cursor_after, "events": self.events,
                "oldest_held": self.oldest_held, "dry_run": self.dry_run, "delivered": self.delivered}


def replay(home: Path, sense: str, source: str, start: str, *, dry_run: bool = False, by: str = "nerve sense replay") -> Replay:
    layout = Layout(home)
    config = load_config(home)
    if sense not in config.senses:
        raise SenseError(f"no sense `{sense}` in nerve.yaml; `nerve sense list` shows the senses")
    sources = all_sources(config, sense)
    if source not in sources:
        known = ", ".join(sources) or "none: no reflex names a source (on: or paths:) for it"
        raise SenseError(f"`{source}` is not a source of {sense}; its sources: {known}")
    kind = sources[source]
    before = _cursor(layout.sense_db(sense), source)
    first, target = _locate(layout, sense, source, kind, start)
    after = max(0, target - 1)
    if after > before:
        raise NerveError(f"--from {start} lies beyond {sense}'s cursor on {source} (event {before}): replaying "
                         f"from there would skip events it has not received; replay only moves a cursor back")
    waiting = _count(layout, sense, source, kind, after)
    if dry_run:
        return Replay(sense, source, kind, before, after, waiting, first, True, None)
    _write(layout.sense_db(sense), source, after, identity_of(layout.data, kind, source))
    with LogStore(layout.logs_db) as logs:
        logs.write(logrows.cursor_moved(sense, source, kind, before, after, waiting, by))
    try:
        request(home, "replayed", sense=sense)
        delivered = "now"
    except EngineNotRunning:
        delivered = "at next start"
    return Replay(sense, source, kind, before, after, waiting, first, False, delivered)


def _cursor(path: Path, source: str) -> int:
    if not path.exists():
        return 0
    conn = connect_readonly(path)
    try:
        cursor = read_cursors(conn).get(source)
        return cursor.last_id if cursor is not None else 0
    finally:
        conn.close()


def _where(sense: str, source: str, kind: str) -> tuple[str, list[Any]]:
    return {"channel": ("channel = ? AND ", [source]), "file": ("sense = ? AND pattern = ? AND ", [sense, source]),
            "sense": ("", [])}[kind]


def _locate(layout: Layout, sense: str, source: str, kind: str, start: str) -> tuple[int | None, int]:
    """(the oldest id the source still holds, the first id to deliver again)."""
    path = source_path(layout.data, kind, source)
    if not path.exists():
        return None, 1
    table = SOURCE_TABLES[kind]
    where, params = _where(sense, source, kind)
    conn = connect_readonly(path)
    try:
        top = head(conn, kind)
        try:
            first = conn.execute(f"SELECT min(id) FROM {table} WHERE {where}1", params).fetchone()[0]
            # ids below the oldest row were archived only if the archiver ever ran on this file (a channel's ids
            # are shared with the other channels of events.db: the ones below its first may simply be theirs)
            held = first if _archived(conn) else None
            if start.strip().isdigit():
                return held, int(start)
            try:
                when = parse_instant(start, now_ms=now_ms())
            except ValueError as exc:
                raise NerveError(f"--from: expected an event id (0: from the start) or a time; {exc}") from None
            found = conn.execute(f"SELECT min(id) FROM {table} WHERE {where}ts >= ?", (*params, when)).fetchone()[0]
        except sqlite3.OperationalError:  # its table does not exist yet: nothing was ever stored
            return None, 1
        return held, found if found is not None else top + 1
    finally:
        conn.close()


def _archived(conn: sqlite3.Connection) -> bool:
    try:
        return conn.execute(f"SELECT 1 FROM {SENSE_META} WHERE key = ?", (WATERMARK,)).fetchone() is not None
    except sqlite3.OperationalError:  # no archiver's table: it never ran here
        return False


def _count(layout: Layout, sense: str, source: str, kind: str, after: int) -> int:
    path = source_path(layout.data, kind, source)
    if not path.exists():
        return 0
    where, params = _where(sense, source, kind)
    conn = connect_readonly(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {SOURCE_TABLES[kind]} WHERE {where}id > ?",
                            (*params, after)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def _write(path: Path, source: str, cursor: int, identity: str | None) -> None:
    """Set the cursor (counted in the source database `identity`) in the listener's database, waiting for a
    compute in progress to commit first."""
    if not path.exists():
        return  # it never consumed anything: every event it will read starts at 0 anyway
    check_file(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        ensure_engine_tables(conn)  # a database from before cursors existed
        with immediate(conn):
            write_cursors(conn, {source: Cursor(cursor, identity)}, now_ms())
    finally:
        conn.close()
