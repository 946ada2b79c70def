"""What a compute's third parameter receives: why it runs, and the events it has not consumed yet.

`compute(db, peers, trigger)` gets a `Trigger`: the reason (interval, cron,
signal, debounced, demand, overdue, backlog, retry), the source that woke it,
and `events`: every event of its `on:` sources since the compute that last
consumed them — other senses' signals and external channel events, in time
order (by id within a source), each with its decoded payload.

Exactly once, by construction: the events are read *inside* the compute's
own transaction (after `BEGIN IMMEDIATE` on the sense's database), and the
sense's cursor per source (`_nerve_cursors`) is written in that same
transaction. A compute that commits consumed them; one that raises, times out
or dies with its worker rolls back, and the next compute receives them again.

What the return value does to the cursor:
- a value: rows, signal and cursor commit together;
- `KEEP`: rows and cursor commit, no signal (a projection advancing its state);
- `None`: the compute's own rows roll back (None stores nothing), but the cursor still
  moves past the events it was given — it looked at them and found nothing
  worth a signal. Were they left in place, a filter that returns None for
  uninteresting events would be handed them again with every later event,
  for ever; to see them again, raise.

A compute that does not take `trigger` reads no events and writes no cursor:
it behaves exactly as before events existed. One that starts taking it
receives everything since its last consuming compute, or, if it never had
one, every event its sources still hold.

A compute receives at most `MAX_EVENTS` events (and about `MAX_BATCH_BYTES`
of payload); `trigger.more` then says the rest wait, and the engine runs it
again at once.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import orjson

from nerve_cli.names import binding_key
from nerve_cli.store.bindings import read_binding, write_binding
from nerve_cli.store.events import (
    KEEP,
    Cursor,
    Event,
    Trigger,
    connect_readonly,
    now_ms,
    read_cursors,
    read_pattern,
    read_source,
    resume_after,
    source_identity,
    source_path,
    write_cursors,
)
from nerve_cli.vocab.sources import SourceKind

__all__ = ["KEEP", "Event", "Trigger", "EventReader", "Batch", "commit_cursors", "read_cursors", "sample_events"]

MAX_EVENTS = 10_000
MAX_BATCH_BYTES = 16 * 1024 * 1024
SAVEPOINT = "nerve_compute"


@dataclass
class Batch:
    """Events read for one compute and where each source's cursor goes if it commits."""

    events: tuple[Event, ...] = ()
    cursors: dict[str, Cursor] = field(default_factory=dict)
    more: bool = False
    # sources whose database was rebuilt since the cursor was counted (another identity): read again from the
    # start of the new one; {source, was_at, identity_was, identity_now}, for the kernel to log
    restarted: list[dict[str, Any]] = field(default_factory=list)
    binding: str | None = None  # the set of parameter values whose cursors these are (store.bindings)
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def consumes(self) -> bool:
        return bool(self.cursors)

    def consumed(self) -> list[dict[str, Any]]:
        """Per source, the events this batch holds: {source, count, first, last} (ids), in `on:` order of first."""
        found: dict[str, dict[str, Any]] = {}
        for event in self.events:
            entry = found.setdefault(event.source, {"source": event.source, "count": 0, "first": event.id,
                                                    "last": event.id})
            entry["count"] += 1
            entry["first"], entry["last"] = min(entry["first"], event.id), max(entry["last"], event.id)
        return list(found.values())


class EventReader:
    """Reads one sense's unconsumed events; keeps a read-only connection per source open between computes."""

    def __init__(self, data: Path, listener: str = "") -> None:
        self.data = Path(data)
        self.listener = listener  # the sense reading: a file source is its own
        self._conns: dict[Path, tuple[sqlite3.Connection, int, str | None]] = {}  # path → (conn, inode, identity)

    def read(self, own: sqlite3.Connection, sources: Mapping[str, str], filters: Mapping[str, Any] | None = None,
             params: Mapping[str, Any] | None = None) -> Batch:
        """Inside the compute's transaction on `own`: the events after each source's cursor.

        `filters` narrow a source's events to its bindings; `params` (a bound read) make the cursors those of
        that set of values rather than the sense's own.
        """
        binding = binding_key(params)
        if not sources:
            return Batch(binding=binding, params=dict(params or {}))
        cursors = read_cursors(own) if binding is None else read_binding(own, binding)[0]
        filters = filters or {}
        order = {name: i for i, name in enumerate(sources)}
        found: list[Event] = []
        moved: dict[str, Cursor] = {}
        restarted: list[dict[str, Any]] = []
        budget, room, more = MAX_EVENTS, MAX_BATCH_BYTES, False
        for name, kind in sources.items():
            opened = self._conn(source_path(self.data, kind, name))
            if opened is None:
                continue
            conn, identity = opened
            cursor = cursors.get(name)
            after, jump = resume_after(conn, kind, name, cursor, identity, self.listener)
            if cursor is not None and jump is not None:
                # rebuilt (another database: its ids started again) or restored (an earlier copy put back)
                restarted.append({"source": name, "was_at": cursor.last_id, "identity_was": cursor.identity,
                                  "identity_now": identity, "why": jump.value, "reads_from": after})
                moved[name] = Cursor(after, identity)
            if budget <= 0 or room <= 0:
                more = more or bool(read_source(conn, kind, name, after, 1, self.listener, filters.get(name)))
                continue
            # a pattern's events keep their own channel as their source; its cursor counts them all (events.db ids)
            rows = read_pattern(conn, name, after, budget + 1, filters.get(name)) if kind == SourceKind.PATTERN \
                else read_source(conn, kind, name, after, budget + 1, self.listener, filters.get(name))
            if len(rows) > budget:
                rows, more = rows[:budget], True
            for event_id, ts, payload, schema_version, digest, *channel in rows:
                if room <= 0:
                    more = True
                    break
                room -= len(payload or "")
                source, source_kind = (channel[0], SourceKind.CHANNEL) if channel else (name, kind)
                found.append(Event(source, event_id, ts, orjson.loads(payload) if payload is not None else None,
                                   source_kind, schema_version, digest))
                moved[name] = Cursor(event_id, identity)
                budget -= 1
        found.sort(key=lambda e: (e.ts, order.get(e.source, len(order)), e.id))
        return Batch(tuple(found), moved, more, restarted, binding, dict(params or {}))

    def _conn(self, path: Path) -> tuple[sqlite3.Connection, str | None] | None:
        """An open read-only connection to `path` and its database's identity, reopened if the file was replaced;
        None while it does not exist."""
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:
            return None
        held = self._conns.get(path)
        if held is not None and held[1] == inode and held[2] is not None:
            return held[0], held[2]
        if held is not None:
            held[0].close()
        try:
            conn = connect_readonly(path)
        except sqlite3.Error:
            return None
        identity = source_identity(conn)  # read once per file: it never changes
        self._conns[path] = (conn, inode, identity)
        return conn, identity

    def close(self) -> None:
        for conn, _inode, _identity in self._conns.values():
            conn.close()
        self._conns.clear()


def commit_cursors(own: sqlite3.Connection, batch: Batch, ts: int, value: bytes | None = None) -> None:
    """Advance the cursors inside the open transaction (a no-op when nothing was read); a bound read also
    keeps `value` (the signal's JSON) as that set of values' current value."""
    if batch.binding is not None:
        if batch.cursors or value is not None:
            write_binding(own, batch.binding, batch.params, batch.cursors, ts, value)
    elif batch.cursors:
        write_cursors(own, batch.cursors, ts)


def sample_events(sample: list[dict[str, Any]]) -> tuple[Event, ...]:
    """A dry run's given events ({source, kind, payload}), as a compute sees events: ids as the stores give
    them, from 1 per sense (a sense's signals are its own) and from 1 over every channel and file pattern
    together (they share data/events.db), so a compute keyed by event id sees no id twice where the real
    one would not."""
    counts: dict[str, int] = {}
    ts = now_ms()
    out = []
    for item in sample:
        source, kind = str(item["source"]), str(item.get("kind") or "channel")
        space = source if kind == SourceKind.SENSE else "events.db"
        counts[space] = counts.get(space, 0) + 1
        out.append(Event(source, counts[space], ts, item.get("payload"), kind))
    return tuple(out)
