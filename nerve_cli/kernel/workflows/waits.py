"""Threads waiting for an event: matched against the event store, never against the in-memory bus.

A thread whose role returned `wait_for_event(source, match, timeout)` is
`waiting` (it holds no slot: see `gates`). This registry keeps, per
source, the threads waiting on it and how far each has read. Whenever events of
a source are committed — an emit, a sense's signal, an offline `nerve emit`,
anything that lands rows in data/events.db or a sense's `_signals` — the kernel
says so (`changed`), and the registry reads that source's new rows off the
loop and gives each thread the first one that matches, oldest first. At the
engine's start every waiting thread reads its source from where its wait
began, so an event committed while no engine ran resumes it then.

Exactly once: a thread resumes by one logs.db transaction (the event as its
next message, its `queued` row). Until that commits it is still waiting, and
reading its source again finds the same first match; once it is queued it is
no longer waiting, so no later event resumes it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.automaton.waits import EventWait, matches
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.events import connect_readonly, last_id_before, read_source, source_identity, source_path
from nerve_cli.vocab.sources import SourceKind

log = logging.getLogger(__name__)

BATCH = 1000  # rows read per pass over a source; a full batch is followed by another pass at once


@dataclass
class Waiter:
    kind: Kind
    thread: Thread
    wait: EventWait
    source_kind: SourceKind  # where its source's events live
    after: int | None = None  # the highest id it has read (None: not resolved from since_ms yet)
    identity: str | None = None  # the identity of the source database `after` counts in (a rebuilt one restarts)


@dataclass(frozen=True)
class Found:
    """The event that resumes a waiter."""

    id: int
    ts: int
    payload: Any


Resume = Callable[[Waiter, Found], None]


class EventWaits:
    def __init__(self, data: Path, resume: Resume) -> None:
        self.data = Path(data)
        self.resume = resume
        self.by_source: dict[str, dict[str, Waiter]] = {}
        self._reading: set[str] = set()  # sources with a pass in flight
        self._again: set[str] = set()  # sources that changed during their pass

    def add(self, waiter: Waiter) -> None:
        """Start waiting; the source is read at once (an event may have come while the role ran)."""
        self.by_source.setdefault(waiter.wait.source, {})[waiter.thread.run_id] = waiter
        self.changed(waiter.wait.source)

    def remove(self, run_id: str) -> Waiter | None:
        for source, waiters in list(self.by_source.items()):
            waiter = waiters.pop(run_id, None)
            if waiter is not None:
                if not waiters:
                    del self.by_source[source]
                return waiter
        return None

    def waiting_on(self) -> list[str]:
        return sorted(self.by_source)

    def changed(self, source: str) -> None:
        """Events of `source` were committed: read them for its waiters (if any)."""
        if source not in self.by_source:
            return
        if source in self._reading:
            self._again.add(source)
            return
        self._read(source)

    def changed_channels(self) -> None:
        """Events were committed to some channel (`nerve emit` with no engine listening): read every channel."""
        for source, waiters in list(self.by_source.items()):
            if any(w.source_kind == SourceKind.CHANNEL for w in waiters.values()):
                self.changed(source)

    def _read(self, source: str) -> None:
        waiters = list(self.by_source[source].values())
        self._reading.add(source)
        plan = [(w.thread.run_id, w.after, w.identity, w.wait.since_ms, dict(w.wait.match)) for w in waiters]
        kind = waiters[0].source_kind
        done = asyncio.get_running_loop().run_in_executor(None, read_waits, self.data, kind, source, plan)
        done.add_done_callback(lambda f: self._read_done(source, waiters, f))

    def _read_done(self, source: str, waiters: list[Waiter], done: asyncio.Future) -> None:
        self._reading.discard(source)
        if done.cancelled():
            return
        if done.exception() is not None:  # an unreadable file now: the next commit of the source tries again
            log.warning("reading %s for waiting threads failed: %s", source, done.exception())
            return
        results, full = done.result()
        for waiter in waiters:
            after, identity, found = results[waiter.thread.run_id]
            current = self.by_source.get(source, {}).get(waiter.thread.run_id)
            if current is not waiter:
                continue  # cancelled, timed out or answered meanwhile
            waiter.after, waiter.identity = after, identity
            if found is not None:
                self.remove(waiter.thread.run_id)
                self.resume(waiter, found)
        if (full or source in self._again) and source in self.by_source:
            self._again.discard(source)
            self._read(source)
        else:
            self._again.discard(source)


Plan = list[tuple[str, "int | None", "str | None", int, dict]]
Read = tuple[int, "str | None", "Found | None"]  # (how far it has read, in which identity, the event that matches)


def read_waits(data: Path, kind: str, source: str, plan: Plan) -> tuple[dict[str, Read], bool]:
    """For each (run_id, after, identity, since_ms, match): how far it has read now and the first event that
    matches.

    Runs in a thread. `after` None is resolved from `since_ms` (the newest id stored before it), and so is an
    `after` counted in another identity of the source's database (rebuilt since: its ids started again, and
    what it holds from since_ms on is still newer than the wait). Returns (results, full): `full` when a batch
    was cut at BATCH rows and more may follow.
    """
    path = source_path(data, kind, source)
    results: dict[str, Read] = {}
    if not path.exists():
        return {run_id: (0, None, None) for run_id, *_ in plan}, False  # when it is made, all of it is newer
    conn = connect_readonly(path)
    try:
        identity = source_identity(conn)
        starts = {run_id: (after if after is not None and (was is None or was == identity)
                           else last_id_before(conn, kind, since))
                  for run_id, after, was, since, _ in plan}
        rows = read_source(conn, kind, source, min(starts.values()), BATCH)
    finally:
        conn.close()
    last = rows[-1][0] if rows else None
    decoded: dict[int, Any] = {}
    for run_id, _, _, since, match in plan:
        start, found = starts[run_id], None
        for event_id, ts, payload, *_ in rows:
            if event_id <= start or ts < since:
                continue
            if event_id not in decoded:
                decoded[event_id] = orjson.loads(payload) if payload is not None else None
            if matches(decoded[event_id], match):
                found = Found(event_id, ts, decoded[event_id])
                break
        results[run_id] = (max(start, last) if last is not None else start, identity, found)
    return results, len(rows) >= BATCH
