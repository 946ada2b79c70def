"""Fan-out: the events a compute emitted (`nerve_cli.sdk.emit`, committed with it), stored and routed like any emit.

The worker answers with the emits its compute committed (`store.fanout`); each
is stored in data/events.db through the emit desk (its listeners wake once it
is committed, as for `nerve emit`), one causal hop deeper than the compute, and
refused past the sense's causal depth bound (`kernel.core.causes`) or when its
channel is a sense's name. The key is the emitter's, or one made from the sense
and the row (`emit:SENSE:ID:TS`), so an answer handled twice stores it once.

Exactly once across crashes, as signals are (`core.ledger`): logs.db's meta
keeps `fanned_out:<sense>`, the highest `_nerve_emits` row stored, raised with
the log's next commit. A compute whose worker died after its COMMIT, before
answering, has emits nobody handed over; so do a kernel killed between the
answer and the store. `replay` hands over the rows above the mark — after a
lost compute, and for every sense at start — and their keys make a row stored
twice one event.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from typing import Any, Iterable

import orjson

from nerve_cli.home import Layout
from nerve_cli.kernel.core.causes import Cause, Causes
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.loop.current import Current
from nerve_cli.store.events import EventError, connect_readonly
from nerve_cli.store.fanout import TABLE
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.sources import SourceKind

MARK = "fanned_out:"  # logs.db meta: + sense → the highest _nerve_emits row stored
REPLAY_LIMIT = 10_000  # rows handed over by one replay (the next lost compute or start hands the rest)


class FanOut:
    def __init__(self, current: Current, causes: Causes, emits: EmitDesk, log: Log, report: Report,
                 logs: LogStore | None = None, layout: Layout | None = None) -> None:
        self.current = current
        self.causes = causes
        self.emits = emits
        self.log = log
        self.report = report
        self.logs = logs  # where the marks are kept (None: no replay, a test's stand-in)
        self.layout = layout
        self.marks: dict[str, int] = {}  # sense → every row up to it settled (and marked in logs.db)
        self.inflight: dict[str, set[int]] = {}  # sense → rows handed to the emit desk, not settled yet
        self.settled: dict[str, int] = {}  # sense → the highest row settled

    def deliver(self, sense: str, compute_id: int, emitted: list[dict[str, Any]]) -> None:
        """Store what compute `compute_id` of `sense` emitted (call while its cause is known: before it ends)."""
        self._store(sense, self.causes.compute(sense, compute_id), emitted)

    def replay_all(self, senses: Iterable[str]) -> int:
        """At start: what every sense committed and nobody handed over (a kernel or worker killed meanwhile)."""
        if self.logs is not None:
            self.marks = {k: int(v) for k, v in self.logs.meta_with_prefix(MARK).items()}
        return sum(self.replay(sense) for sense in senses)

    def replay(self, sense: str) -> int:
        """Hand over `sense`'s emits above its mark (a lost compute's, committed before its worker died): the
        number of rows; each as a new chain (its compute's cause is gone), its key making a repeat one event."""
        if self.logs is None or self.layout is None:
            return 0
        path = self.layout.sense_db(sense)
        if not path.exists():
            return 0
        after = self.marks.get(sense, 0)
        try:
            conn = connect_readonly(path)
            try:
                rows = conn.execute(f"SELECT id, channel, payload, key, ts FROM {TABLE} WHERE id > ? ORDER BY id "
                                    "LIMIT ?", (after, REPLAY_LIMIT)).fetchall()
            finally:
                conn.close()
        except sqlite3.Error:  # no emits table (a sense that never emitted), or a damaged file its worker reports
            return 0
        items = [{"id": r[0], "channel": r[1], "payload": r[2], "key": r[3], "ts": r[4]} for r in rows]
        if items:
            self.report("warn", f"{sense}: {len(items)} emit(s) committed by its compute and not handed over "
                                "(its worker or the engine was killed after the commit): stored now")
            self._store(sense, Cause(0, (f"{sense} (recovered)",)), items)
        return len(items)

    def _store(self, sense: str, cause: Cause, emitted: list[dict[str, Any]]) -> None:
        rows = [i["id"] for i in emitted if isinstance(i.get("id"), int)]
        self.inflight.setdefault(sense, set()).update(rows)
        for item in emitted:
            channel, row = str(item.get("channel")), item.get("id")
            if self.current.config.source_kind(channel) is SourceKind.SENSE:
                self._refused(sense, channel, f"{channel!r} is a sense: senses emit their own signals; emit to a "
                                              "channel")
                self._done(sense, row)
                continue
            caused = cause.hop(channel)
            if not self.causes.admit("emit", channel, caused, sense):
                self._done(sense, row)  # refused for good: a replay must not store it as a new chain
                continue
            payload = item.get("payload")
            key = item.get("key") or f"emit:{sense}:{row}:{item.get('ts', '')}"
            try:
                stored = self.emits.emit(channel, None if payload is None else orjson.Fragment(payload), key,
                                         cause=caused)
            except EventError as exc:
                self._refused(sense, channel, str(exc))
                self._done(sense, row)
                continue
            stored.add_done_callback(functools.partial(self._stored, sense, channel, row))

    def _stored(self, sense: str, channel: str, row: Any, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is not None:
            self._refused(sense, channel, str(done.exception()))
        self._done(sense, row)

    def _done(self, sense: str, row: Any) -> None:
        """Row `row` is settled (stored, or refused for good): the mark rises to the highest row below which
        every row handed over is settled, so a row still being stored is never passed over by a replay."""
        if not isinstance(row, int):
            return
        waiting = self.inflight.get(sense, set())
        waiting.discard(row)
        self.settled[sense] = max(self.settled.get(sense, 0), row)
        mark = min(waiting) - 1 if waiting else self.settled[sense]
        if self.logs is not None and mark > self.marks.get(sense, 0):
            self.marks[sense] = mark
            self.logs.mark(MARK + sense, mark)

    def _refused(self, sense: str, channel: str, why: str) -> None:
        message = f"sense {sense}: emit to {channel} refused: {why}"
        self.log(logrows.error(sense, message, sense=sense, error_type="EventError", channel=channel))
        self.report("error", message)
