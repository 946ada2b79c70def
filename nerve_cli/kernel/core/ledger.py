"""Every committed signal and every stored event gets its log row, even when the kernel is killed.

The kernel batches log rows (committed every 10 ms) so that no hop waits for a
commit; a `kill -9` loses the newest of them. Rather than wait for the log
before answering, the log keeps watermarks in `meta`, raised in the same
transaction as the rows they cover (`LogStore.mark`):

- `logged_signal:<sense>`: the highest `_signals.id` of that sense whose
  `reflex/run_complete` row (with `signal_id`) is in the log;
- `logged_event`: the highest `events.id` whose `signal/emit` row is.

Whatever lies above a watermark was committed by a worker (or stored by an
emit) and never logged. The ledger writes those rows, with `"recovered": true`
and the row's own time, at start-up (before anything is scheduled), when a
signal id jumps (the kernel missed an answer), when an event id jumps (another
writer stored events the engine was not told of), after a compute was lost (its
worker may have died after COMMIT, before answering) and at shutdown. A row
is written once: the engine does not log an event a catch-up already logged.

An instance that predates the watermarks (no `log_marks` in meta) starts
them at each database's current head: only what is committed from then on is
accounted for, so old history is never re-logged.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable

import orjson

from nerve_cli.home import Layout
from nerve_cli.kernel.core.report import Log
from nerve_cli.store.events import connect_readonly, events_after, head
from nerve_cli.store.logs import EVENT_MARK, SIGNAL_MARK, LogStore, event_mark, signal_mark
from nerve_cli.vocab import logrows
from nerve_cli.vocab.outcomes import Outcome

VERSION = "log_marks"

# (source, type, ref, payload, ts, mark): how the ledger writes a row with the watermark it advances


class Ledger:
    def __init__(self, layout: Layout, logs: LogStore, append: Log) -> None:
        self.layout = layout
        self.logs = logs
        self.append = append
        self.signals: dict[str, int] = {}  # sense → highest signal id logged
        self.event = 0

    # -- start-up ------------------------------------------------------------------
    def start(self) -> tuple[int, int]:
        """Load the watermarks and log what lies above them; (signals, events) recovered."""
        self.signals = {k: int(v) for k, v in self.logs.meta_with_prefix(SIGNAL_MARK).items()}
        self.event = int(self.logs.get_meta(EVENT_MARK) or 0)
        legacy = self.logs.get_meta(VERSION) is None
        signals = 0
        for path in sorted(self.layout.sense_data.glob("*.db")) if self.layout.sense_data.is_dir() else []:
            if legacy and path.stem not in self.signals:
                self._set(path.stem, _head(path))
            else:
                signals += len(self.catch_up(path.stem))
        events = self.catch_up_events()
        self.logs.set_meta(VERSION, "1")
        return signals, events

    # -- while running -------------------------------------------------------------
    def signal(self, sense: str, signal_id: int | None) -> list[int]:
        """A signal answer arrived: log any committed signals it skipped (the caller logs this one, then `logged`)."""
        if signal_id is None or signal_id <= self.signals.get(sense, 0) + 1:
            return []
        return self.catch_up(sense, below=signal_id)

    def logged(self, sense: str, signal_id: int) -> None:
        """The caller appended this signal's run_complete with `mark(sense, signal_id)`."""
        self.signals[sense] = max(signal_id, self.signals.get(sense, 0))

    def event_logged(self, event_id: int) -> None:
        self.event = max(event_id, self.event)

    def routing(self, event_id: int) -> bool:
        """The engine stored `event_id` and is about to log it: whether it still should (the caller logs it with
        `event_mark`, then `event_logged`).

        Ids are given in commit order, and the engine routes its own events in that order, so an id above the
        watermark's next was stored by another writer (an offline `nerve emit` that no engine heard of): those are
        logged first, or the watermark would pass them and no catch-up would ever see them. An id at or below the
        watermark was already logged by a catch-up that read it between its commit and this call (an offline emit's
        `events_stored`, the shutdown): logging it again would double it."""
        if event_id <= self.event:
            return False
        if event_id > self.event + 1:
            self.catch_up_events(below=event_id)
        return True

    signal_mark = staticmethod(signal_mark)
    event_mark = staticmethod(event_mark)

    def catch_up(self, sense: str, below: int | None = None) -> list[int]:
        """Log the committed signals of `sense` above its watermark (ids below `below`); their ids."""
        path = self.layout.sense_db(sense)
        if not path.exists():
            return []
        last = self.signals.get(sense, 0)
        sql, params = "SELECT id, ts FROM _signals WHERE id > ?", [last]
        if below is not None:
            sql += " AND id < ?"
            params.append(below)
        rows = _read(path, sql + " ORDER BY id", tuple(params))
        for signal_id, ts in rows:
            self.append(logrows.run_complete(sense, None, Outcome.SIGNAL, None, signal_id=signal_id), ts,
                        self.signal_mark(sense, signal_id))
            self.logged(sense, signal_id)
        return [r[0] for r in rows]

    def catch_up_events(self, below: int | None = None) -> int:
        """Log the stored events above the watermark (ids below `below`); how many."""
        path = self.layout.events_db
        if not path.exists():
            return 0
        rows = events_after(path, self.event, below)
        for row in rows:
            payload = orjson.loads(row["payload"]) if row["payload"] is not None else None
            self.append(logrows.emit(row["channel"], payload, row["id"], recovered=True, origin=row["origin"],
                                     schema_version=row["schema_version"], hash=row["hash"]),
                        row["ts"], self.event_mark(row["id"]))
            self.event_logged(row["id"])
        return len(rows)

    def catch_up_all(self, senses: Iterable[str]) -> int:
        """At shutdown: whatever was committed and never logged (e.g. a worker that outlived a lost answer)."""
        return sum(len(self.catch_up(s)) for s in senses) + self.catch_up_events()

    def _set(self, sense: str, signal_id: int) -> None:
        self.signals[sense] = signal_id
        self.logs.mark(SIGNAL_MARK + sense, signal_id)


def _head(path: Path) -> int:
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return 0
    try:
        return head(conn, "sense")
    finally:
        conn.close()


def _read(path: Path, sql: str, params: tuple) -> list[tuple]:
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error:  # no such table yet, or unreadable now: the next catch-up will see
        return []
    finally:
        conn.close()
