"""Sending what this host publishes: each source's committed rows, in id order, marked sent on acknowledgement.

The kernel pokes a source when it commits something new (a published sense's
signal, an emit on a published channel); the outbox reads the rows above the
source's sent mark (`store.fleet`), publishes them as one pipelined window
with their message ids, and moves the mark past the ones the server
acknowledged, in order. The first failure ends the window: the link drops the
connection, and once a new one is up the same rows go again from the first
unacknowledged one (the server drops those it already holds by message id).

Nothing here runs in the engine's scheduling path: a poke is a set insertion,
and SQLite reads and writes go to the fleet's own thread. While NATS is away
the rows simply stay where they were committed; the outbox counts them (at
most every `COUNT_EVERY`) for status and metrics.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import orjson

from nerve_cli.config.fleet import channel_subject, sense_subject
from nerve_cli.config.model import FleetConfig
from nerve_cli.kernel.core.causes import Cause
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.fleet.link import REQUEST_TIMEOUT, Link, first_of
from nerve_cli.store.events import Cursor
from nerve_cli.store.fleet import OutboxStore, Row, Source
from nerve_cli.vocab import logrows
from nerve_cli.vocab.sources import SourceKind

MAX_BATCH = 256  # rows in one pipelined window
MAX_BATCH_BYTES = 4 << 20  # payload bytes read for one window
HEADER_ROOM = 1024  # bytes kept for headers within the server's max_payload
COUNT_EVERY = 0.25  # seconds between two counts of the outbox while NATS is away

T = TypeVar("T")


def message_id(host: str, kind: str, name: str, row: Row) -> str:
    """Unique in the fleet: the row's id and its time, so a rebuilt source database (ids from 1 again) never
    repeats an id the receivers have already seen."""
    return f"{host}.{kind}.{name}.{row.id}.{row.ts}"


class Outbox:
    def __init__(self, fleet: FleetConfig, host: str, link: Link, store: OutboxStore, thread: ThreadPoolExecutor,
                 log: Log, report: Report, cause_of: Callable[[str], Cause | None] | None = None) -> None:
        self.host = host
        self.cause_of = cause_of  # a source's latest causal depth and path: sent along (Nerve-Depth, Nerve-Path)
        self.link = link
        self.store = store
        self.thread = thread
        self.log = log
        self.report = report
        self.subjects: dict[Source, str] = {("sense", s): sense_subject(fleet.stream, host, s)
                                            for s in fleet.publish.senses}
        self.subjects.update({("channel", c): channel_subject(fleet.stream, host, c) for c in fleet.publish.channels})
        self.sent: dict[Source, Cursor] = {}  # the last id acknowledged, and in which source database
        self.dirty: set[Source] = set(self.subjects)  # sources whose database must be read for rows to send
        self.fresh: dict[Source, list[Row]] = {}  # rows the kernel handed over as it committed them, in order
        self.depth = 0  # rows waiting, as last counted
        self.published = 0
        self.too_large = 0
        self._said_too_large: dict[Source, int] = {}  # the last row of each source logged as too large (said once)
        self._wake = asyncio.Event()
        self._uncounted = True

    def poke(self, kind: str, name: str, row: Row | None = None) -> None:
        """Something of (kind, name) was committed here (`row`, when the kernel has it at hand); sent soon when
        the source is published.

        A row handed over is sent from memory, without reading the database, as long as nothing is pending for
        its source there: every row the kernel commits is handed over in order, and the database is read again
        when one is not (`row` None), after a failed send, and while NATS is away.
        """
        source = (kind, name)
        if source not in self.subjects:
            return
        if row is None or source in self.dirty or not self.link.connected:
            self.dirty.add(source)
            self.fresh.pop(source, None)
        else:
            self.fresh.setdefault(source, []).append(row)
        self._uncounted = True
        self._wake.set()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.thread, fn, *args)

    async def run(self) -> None:
        marks = await self._in_thread(self.store.sent)
        self.sent = {source: marks.get(source, Cursor(0)) for source in self.subjects}
        while True:
            self._wake.clear()
            if self.link.connected and (self.dirty or self.fresh):
                await self._drain()
            if self.link.connected and not self.dirty and not self.fresh:
                self.depth, self._uncounted = 0, False  # everything poked so far was acknowledged
            elif self._uncounted:
                self._uncounted = False
                self.fresh.clear()  # NATS is away: the rows wait where they were committed
                self.depth = await self._in_thread(self._count)
            if (self.dirty or self.fresh) and self.link.connected:
                continue
            waits = [self._wake.wait()] + ([self.link.ready.wait()] if self.dirty else [])
            await first_of(*waits)
            if not self.link.connected:
                await asyncio.sleep(COUNT_EVERY)  # while NATS is away, count at most this often

    def _count(self) -> int:
        return sum(self.store.depth(source, self.store.current(source, self.sent.get(source)).last_id)
                   for source in self.subjects)

    async def _drain(self) -> None:
        while (self.dirty or self.fresh) and self.link.connected:
            read = bool(self.dirty)
            if read:
                source = self.dirty.pop()
                rows = await self._in_thread(self._read, source)
            else:
                source, rows = self.fresh.popitem()
                if rows[0].id <= self._last(source):  # a read sent some, or the database was rebuilt: read it
                    self.dirty.add(source)
                    continue
                if rows[MAX_BATCH:]:
                    self.fresh[source], rows = rows[MAX_BATCH:], rows[:MAX_BATCH]
            if not rows:
                continue
            done = await self._publish(source, rows)
            if done:
                mark = Cursor(rows[done - 1].id, self.sent.get(source, Cursor(0)).identity)
                await self._in_thread(self.store.mark_sent, source, mark)
                self.sent[source] = mark
                self.published += done
            if done < len(rows):
                self.dirty.add(source)
                self.fresh.pop(source, None)
                self._uncounted = True
                return
            if read and (len(rows) == MAX_BATCH or sum(len(r.payload or "") for r in rows) >= MAX_BATCH_BYTES):
                self.dirty.add(source)  # more may wait behind this window

    def _last(self, source: Source) -> int:
        mark = self.sent.get(source)
        return mark.last_id if mark is not None else 0

    def _read(self, source: Source) -> list[Row]:
        """In the fleet's thread: the rows above the sent mark (from the start of a database rebuilt since)."""
        mark = self.store.current(source, self.sent.get(source))
        self.sent[source] = mark
        return self.store.read(source, mark.last_id, MAX_BATCH, MAX_BATCH_BYTES)

    async def _publish(self, source: Source, rows: list[Row]) -> int:
        """Publish one window; how many rows from its start are done (acknowledged, or too large to send)."""
        js, lost = self.link.js, self.link.lost
        if js is None or lost.is_set():
            return 0
        kind, name = source
        subject, limit = self.subjects[source], self.link.max_payload - HEADER_ROOM
        sends: list[asyncio.Task | None] = []
        cause = self.cause_of(name) if self.cause_of is not None else None
        caused = {} if cause is None else {"Nerve-Depth": str(cause.depth),
                                           "Nerve-Path": orjson.dumps(list(cause.path[-8:])).decode()}
        for row in rows:
            data = row.payload.encode() if isinstance(row.payload, str) else (row.payload or b"")
            if len(data) > limit:
                self._too_large(kind, name, row, len(data))
                sends.append(None)
                continue
            headers = {"Nats-Msg-Id": message_id(self.host, kind, name, row), "Nerve-Host": self.host,
                       "Nerve-Kind": kind, "Nerve-Source": name, "Nerve-Id": str(row.id), "Nerve-Ts": str(row.ts)}
            if row.traceparent is not None:
                headers["traceparent"] = row.traceparent
            headers.update(caused)
            sends.append(asyncio.ensure_future(js.publish(subject, data, timeout=REQUEST_TIMEOUT, headers=headers)))
        tasks = [t for t in sends if t is not None]
        if tasks:
            await first_of(asyncio.wait(tasks), lost.wait())
        for task in tasks:
            if not task.done():
                task.cancel()  # the connection went: these are sent again on the next one
        for i, sent in enumerate(sends):
            if sent is None:
                continue  # too large to send: skipped (and logged) so the rest of its source is not held up
            elif sent.cancelled() or sent.exception() is not None:
                for rest in tasks:
                    if rest.done() and not rest.cancelled():
                        rest.exception()  # retrieved: an error after the first one says nothing new
                error = None if sent.cancelled() else sent.exception()
                self.link.trouble(error or "the connection went", "could not publish")
                return i
        return len(rows)

    def _too_large(self, kind: str, name: str, row: Row, size: int) -> None:
        if self._said_too_large.get((kind, name), 0) >= row.id:
            return  # the same row in a window sent again: said once
        self._said_too_large[(kind, name)] = row.id
        limit = self.link.max_payload
        what = f"signal #{row.id} of sense {name}" if kind == SourceKind.SENSE else f"event #{row.id} of channel {name}"
        message = (f"{what} is {size:,} bytes, more than the NATS server's max_payload of {limit:,}; not sent "
                   "(raise max_payload in the server's configuration to send payloads this large)")
        self.too_large += 1
        self.log(logrows.fleet_not_sent(name, kind, row.id, size, limit, message))
        self.report("error", f"fleet: {message}")

