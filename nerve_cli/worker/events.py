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
- `None`: the compute's own rows roll back (RFC §4.1), but the cursor still
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
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import orjson

from nerve_cli.store.events import connect_readonly, head, read_cursors, read_source, source_path, write_cursors

if TYPE_CHECKING:
    from nerve_cli.store.logview import LogReader

MAX_EVENTS = 10_000
MAX_BATCH_BYTES = 16 * 1024 * 1024
SAVEPOINT = "nerve_compute"


class _Keep:
    """Return `KEEP` from a compute to commit what it wrote (and its consumed events) without a signal."""

    _instance: "_Keep | None" = None

    def __new__(cls) -> "_Keep":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "KEEP"

    def __reduce__(self) -> str:
        return "KEEP"


KEEP = _Keep()


@dataclass(frozen=True)
class Event:
    """One event: a signal of sense `source` (kind "sense") or an event sent to channel `source` (kind "channel")."""

    source: str
    id: int  # grows within a source
    ts: int  # unix ms when it was stored
    payload: Any
    kind: str  # "sense" | "channel"


@dataclass(frozen=True)
class Trigger:
    """Why this compute runs and the events it receives (see the module docstring)."""

    reason: str  # interval | cron | signal | debounced | demand | overdue | backlog | retry
    source: str | None = None  # for signal/debounced: the source whose event woke it
    events: tuple[Event, ...] = ()
    sources: tuple[str, ...] = ()  # the sense's `on:` sources
    more: bool = False  # more events wait beyond this batch; another compute follows at once
    compute_id: int = 0
    home: Path | None = field(default=None, repr=False)
    _log: list = field(default_factory=list, repr=False, compare=False)

    def of(self, source: str) -> list[Event]:
        """The events of one source, in order."""
        return [e for e in self.events if e.source == source]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def log(self) -> "LogReader":
        """A read-only handle on the engine's Log (logs and workflow_runs, archived days on request)."""
        if not self._log:
            from nerve_cli.store.logview import LogReader

            if self.home is None:
                raise RuntimeError("this trigger was built without an instance folder; it has no Log")
            self._log.append(LogReader(self.home))
        return self._log[0]


def parse_reason(reason: str) -> tuple[str, str | None]:
    """The kernel's reason string → (kind, source): `on x` → ("signal", "x"), `on x (debounced)` → ("debounced", "x")."""
    if reason.startswith("on "):
        rest = reason[3:]
        if rest.endswith(" (debounced)"):
            return "debounced", rest[: -len(" (debounced)")]
        return "signal", rest
    return reason, None


@dataclass
class Batch:
    """Events read for one compute and where each source's cursor goes if it commits."""

    events: tuple[Event, ...] = ()
    cursors: dict[str, int] = field(default_factory=dict)
    more: bool = False

    @property
    def consumes(self) -> bool:
        return bool(self.cursors)


class EventReader:
    """Reads one sense's unconsumed events; keeps a read-only connection per source open between computes."""

    def __init__(self, data: Path) -> None:
        self.data = Path(data)
        self._conns: dict[Path, tuple[sqlite3.Connection, int]] = {}

    def read(self, own: sqlite3.Connection, sources: Mapping[str, str]) -> Batch:
        """Inside the compute's transaction on `own`: the events after each source's cursor."""
        if not sources:
            return Batch()
        cursors = read_cursors(own)
        order = {name: i for i, name in enumerate(sources)}
        found: list[Event] = []
        moved: dict[str, int] = {}
        budget, room, more = MAX_EVENTS, MAX_BATCH_BYTES, False
        for name, kind in sources.items():
            conn = self._conn(source_path(self.data, kind, name))
            if conn is None:
                continue
            after = cursors.get(name, 0)
            if after > head(conn, kind):
                after = moved[name] = 0  # its database was recreated and its ids start again
            if budget <= 0 or room <= 0:
                more = more or bool(read_source(conn, kind, name, after, 1))
                continue
            rows = read_source(conn, kind, name, after, budget + 1)
            if len(rows) > budget:
                rows, more = rows[:budget], True
            for event_id, ts, payload in rows:
                if room <= 0:
                    more = True
                    break
                room -= len(payload or "")
                found.append(Event(name, event_id, ts, orjson.loads(payload) if payload is not None else None, kind))
                moved[name] = event_id
                budget -= 1
        found.sort(key=lambda e: (e.ts, order[e.source], e.id))
        return Batch(tuple(found), moved, more)

    def _conn(self, path: Path) -> sqlite3.Connection | None:
        """An open read-only connection to `path`, reopened if the file was replaced; None while it does not exist."""
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:
            return None
        held = self._conns.get(path)
        if held is not None and held[1] == inode:
            return held[0]
        if held is not None:
            held[0].close()
        try:
            conn = connect_readonly(path)
        except sqlite3.Error:
            return None
        self._conns[path] = (conn, inode)
        return conn

    def close(self) -> None:
        for conn, _ in self._conns.values():
            conn.close()
        self._conns.clear()


def commit_cursors(own: sqlite3.Connection, batch: Batch, ts: int) -> None:
    """Advance the cursors inside the open transaction (a no-op when nothing was read)."""
    if batch.cursors:
        write_cursors(own, batch.cursors, ts)
