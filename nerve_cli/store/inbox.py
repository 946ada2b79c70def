"""The agents' inboxes (`data/agents.db`): what each agent has heard, been handed, and acknowledged.

An agent (`agents:` in nerve.yaml) is a listener without code. Every adapter
that reaches one — the hook command `nerve agent wait`, `nerve agent next`,
MCP's `wait_for_events`, the Codex app-server — goes through this one store,
so the guarantees are the same whichever carries the events:

- **Intake.** Per agent and source, a cursor (`agent_cursors`, with the
  source database's identity, as a sense's `_nerve_cursors`) says how far the
  agent has *heard*. An intake copies the events after it (those matching the
  agent's `match:`, narrowed in SQL like a reflex's bindings) into
  `agent_events` and moves the cursor, in one transaction: an event is heard
  once. A source the agent never heard starts after its newest event at that
  first look (`start: new`) or at its first one (`start: all`).
- **Delivery.** A take hands the oldest heard events (at most `batch`) to the
  caller as one *delivery* with an id that never changes (`agent_deliveries`).
  The delivery stays *pending* until acknowledged. A pending delivery is handed
  again — same id, same events — to the next take that does not acknowledge it
  first (a harness that restarted, a client that lost its answer), so a
  harness can tell a repeat from news by the id. One delivery is pending per
  agent and `narrow` (an MCP caller's own match) at a time: events arrive in
  order, one turn after another.
- **Acknowledgement.** `ack` marks a delivery done: its events never come back
  (their copies are deleted; the delivery row stays, as the record). A take
  with `ack_previous` first acknowledges what was handed to the same session
  (the hook command's "calling it again acknowledges the previous call").

Works with or without an engine: every writer (CLI, MCP server, engine) opens
this file and serialises on SQLite's write lock (`BEGIN IMMEDIATE`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import orjson

from nerve_cli.clock import now_ms
from nerve_cli.schema.apply import IDENTITY_SQL
from nerve_cli.store.cursor import Cursor
from nerve_cli.store.events import (
    connect_readonly,
    count_after,
    head,
    read_source,
    resume_after,
    source_identity,
    source_path,
)
from nerve_cli.store.sqlitefile import immediate, open_writer

DB_NAME = "agents.db"
INTAKE_LIMIT = 10_000  # events heard per source in one transaction (the next take hears the rest)
TEXT_LIMIT = 10_000  # characters of the text a model reads (Claude Code caps a hook's text at this)

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agent_cursors (agent TEXT NOT NULL, source TEXT NOT NULL, last_id INTEGER NOT NULL, "
    "identity TEXT, ts INTEGER NOT NULL, PRIMARY KEY (agent, source))",
    "CREATE TABLE IF NOT EXISTS agent_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, "
    "source TEXT NOT NULL, kind TEXT NOT NULL, event_id INTEGER NOT NULL, ts INTEGER NOT NULL, payload TEXT, "
    "schema_version TEXT, hash TEXT, heard_ms INTEGER NOT NULL, delivery INTEGER)",
    "CREATE INDEX IF NOT EXISTS idx_agent_events ON agent_events (agent, delivery, seq)",
    "CREATE TABLE IF NOT EXISTS agent_deliveries (id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, "
    "narrow TEXT NOT NULL DEFAULT '', events INTEGER NOT NULL, created_ms INTEGER NOT NULL, "
    "handed_ms INTEGER NOT NULL, handed INTEGER NOT NULL DEFAULT 1, session TEXT, via TEXT, "
    "acked_ms INTEGER, acked_by TEXT, first_ts INTEGER, refs TEXT)",  # refs: [[source, event id], ...], kept
    "CREATE INDEX IF NOT EXISTS idx_agent_deliveries ON agent_deliveries (agent, acked_ms, id)",
    *IDENTITY_SQL,
)


@dataclass(frozen=True)
class AgentEvent:
    """One event as an agent receives it."""

    source: str
    kind: str  # sense | channel
    id: int  # its id in its source
    ts: int  # unix ms when its source stored it
    payload: Any
    schema_version: str | None = None
    hash: str | None = None


@dataclass(frozen=True)
class Delivery:
    """Events handed to an agent together, for one turn; pending until acknowledged."""

    id: int
    agent: str
    events: tuple[AgentEvent, ...]
    created_ms: int
    handed: int  # how many times it was handed (1: this is the first)
    session: str | None = None  # who it was last handed to
    more: bool = False  # more heard events wait behind it

    @property
    def redelivered(self) -> bool:
        return self.handed > 1


@dataclass(frozen=True)
class Taken:
    """What one take did: the delivery handed (None: nothing to hand) and the deliveries it acknowledged first."""

    delivery: Delivery | None
    acked: tuple[int, ...] = ()


def payload_matches(payload: Any, match: Mapping[str, Any] | None) -> bool:
    """Every key of `match` (a.b for nesting) is in the payload with that value, or one of a list of values."""
    for key, wanted in (match or {}).items():
        value: Any = payload
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return False
            value = value[part]
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(value == option and type(value) is type(option) or _number_equal(value, option)
                   for option in options):
            return False
    return True


def _number_equal(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool)
            and not isinstance(b, bool) and a == b)


def narrow_key(narrow: Mapping[str, Any] | None) -> str:
    """A caller's own match as stored beside its delivery ('' for none)."""
    return orjson.dumps(dict(narrow), option=orjson.OPT_SORT_KEYS).decode() if narrow else ""


class Inbox:
    """The writer of data/agents.db (every process that hands agents their events opens its own)."""

    def __init__(self, data: Path) -> None:
        self.data = Path(data)
        self.path = self.data / DB_NAME
        self.conn = open_writer(self.path, fix=f"move it aside (`mv {self.path} {self.path}.damaged`): the agents "
                                               "then start again from their sources' newest events")
        with immediate(self.conn):
            for statement in SCHEMA:
                self.conn.execute(statement)
            columns = {row[1] for row in self.conn.execute("PRAGMA table_info(agent_deliveries)")}
            if "refs" not in columns:  # a file from before deliveries named their events
                self.conn.execute("ALTER TABLE agent_deliveries ADD COLUMN refs TEXT")

    def close(self) -> None:
        self.conn.close()

    # -- hearing ---------------------------------------------------------------------------------------------
    def intake(self, agent: str, sources: Mapping[str, str], match: Mapping[str, Any] | None = None,
               start: str = "new") -> int:
        """Copy what `agent` has not heard of its sources into its inbox; the number of events heard."""
        with immediate(self.conn):
            return self._intake(agent, sources, match, start)

    def _intake(self, agent: str, sources: Mapping[str, str], match: Mapping[str, Any] | None, start: str) -> int:
        conn, ts, heard = self.conn, now_ms(), 0
        cursors = {s: Cursor(i, ident, t) for s, i, ident, t in conn.execute(
            "SELECT source, last_id, identity, ts FROM agent_cursors WHERE agent = ?", (agent,))}
        for name, kind in sources.items():
            cursor = cursors.get(name)
            path = source_path(self.data, kind, name)
            if not path.exists():
                if cursor is None:  # nothing there yet: when it appears, its first event is news
                    self._move(agent, name, Cursor(0, None), ts)
                continue
            try:
                source = connect_readonly(path)
            except sqlite3.Error:
                continue  # unreadable now: heard at the next look
            try:
                identity, top = source_identity(source), head(source, kind)
                if cursor is None:
                    cursor = Cursor(top if start == "new" else 0, identity)
                    self._move(agent, name, cursor, ts)
                after, jump = resume_after(source, kind, name, cursor, identity)
                if jump is not None:  # made again (its ids start over), or an earlier copy put back
                    self._move(agent, name, Cursor(after, identity), ts)
                rows = read_source(source, kind, name, after, INTAKE_LIMIT, "", match or None)
            finally:
                source.close()
            if rows:
                conn.executemany(
                    "INSERT INTO agent_events (agent, source, kind, event_id, ts, payload, schema_version, hash, "
                    "heard_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(agent, name, kind, i, t, p, v, h, ts) for i, t, p, v, h in rows])
                self._move(agent, name, Cursor(rows[-1][0], identity), ts)
                heard += len(rows)
            elif identity is not None and cursor.identity is None:
                self._move(agent, name, Cursor(after, identity), ts)
        return heard

    def _move(self, agent: str, source: str, cursor: Cursor, ts: int) -> None:
        self.conn.execute(
            "INSERT INTO agent_cursors (agent, source, last_id, identity, ts) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (agent, source) DO UPDATE SET last_id = excluded.last_id, identity = excluded.identity, "
            "ts = excluded.ts", (agent, source, cursor.last_id, cursor.identity, ts))

    # -- handing out -----------------------------------------------------------------------------------------
    def take(self, agent: str, sources: Mapping[str, str], *, match: Mapping[str, Any] | None = None,
             batch: int = 20, session: str | None = None, ack_previous: bool = False,
             narrow: Mapping[str, Any] | None = None, start: str = "new", via: str | None = None) -> Taken:
        """Hand `agent` its pending delivery again, or a new one of the oldest heard events, in one transaction.

        `ack_previous`: first acknowledge what was handed to `session` (None: to no session in particular).
        `narrow`: a caller's own match on top of the agent's (its events stay heard for other callers).
        """
        key = narrow_key(narrow)
        with immediate(self.conn):
            acked: tuple[int, ...] = ()
            if ack_previous:
                acked = self._ack(agent, self._pending_ids(agent, session=session, any_session=False), session or via)
            again = self.conn.execute(
                "SELECT id FROM agent_deliveries WHERE agent = ? AND acked_ms IS NULL AND narrow = ? ORDER BY id "
                "LIMIT 1", (agent, key)).fetchone()
            if again is not None:
                self.conn.execute("UPDATE agent_deliveries SET handed = handed + 1, handed_ms = ?, session = ?, "
                                  "via = coalesce(?, via) WHERE id = ?", (now_ms(), session, via, again[0]))
                return Taken(self._delivery(again[0]), acked)
            self._intake(agent, sources, match, start)
            chosen = self._choose(agent, batch, narrow)
            if not chosen:
                return Taken(None, acked)
            ts = now_ms()
            first = min(row[1] for row in chosen)
            refs = self._refs([row[0] for row in chosen])  # which events: a trace links the delivery to each
            cur = self.conn.execute(
                "INSERT INTO agent_deliveries (agent, narrow, events, created_ms, handed_ms, session, via, first_ts, "
                "refs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (agent, key, len(chosen), ts, ts, session, via, first, refs))
            delivery = int(cur.lastrowid or 0)
            self.conn.executemany("UPDATE agent_events SET delivery = ? WHERE seq = ?",
                                  [(delivery, row[0]) for row in chosen])
            return Taken(self._delivery(delivery), acked)

    def _refs(self, seqs: list[int]) -> str:
        marks = ",".join("?" * len(seqs))
        rows = self.conn.execute(f"SELECT source, event_id FROM agent_events WHERE seq IN ({marks}) ORDER BY ts, seq",
                                 seqs).fetchall()
        return orjson.dumps([[source, event_id] for source, event_id in rows]).decode()

    def _choose(self, agent: str, batch: int, narrow: Mapping[str, Any] | None) -> list[tuple[int, int]]:
        """(seq, ts) of the oldest heard, unhanded events (matching `narrow`), at most `batch`."""
        if not narrow:
            return [(s, t) for s, t in self.conn.execute(
                "SELECT seq, ts FROM agent_events WHERE agent = ? AND delivery IS NULL ORDER BY ts, seq LIMIT ?",
                (agent, batch))]
        out = []
        for seq, ts, payload in self.conn.execute(
                "SELECT seq, ts, payload FROM agent_events WHERE agent = ? AND delivery IS NULL ORDER BY ts, seq",
                (agent,)):
            if payload_matches(orjson.loads(payload) if payload is not None else None, narrow):
                out.append((seq, ts))
                if len(out) >= batch:
                    break
        return out

    def _delivery(self, delivery: int) -> Delivery:
        agent, created, handed, session = self.conn.execute(
            "SELECT agent, created_ms, handed, session FROM agent_deliveries WHERE id = ?", (delivery,)).fetchone()
        events = tuple(AgentEvent(s, k, i, t, orjson.loads(p) if p is not None else None, v, h)
                       for s, k, i, t, p, v, h in self.conn.execute(
                           "SELECT source, kind, event_id, ts, payload, schema_version, hash FROM agent_events "
                           "WHERE delivery = ? ORDER BY ts, seq", (delivery,)))
        more = self.conn.execute("SELECT 1 FROM agent_events WHERE agent = ? AND delivery IS NULL LIMIT 1",
                                 (agent,)).fetchone() is not None
        return Delivery(delivery, agent, events, created, handed, session, more)

    # -- acknowledging ---------------------------------------------------------------------------------------
    def ack(self, agent: str, ids: Iterable[int] | None = None, by: str | None = None) -> tuple[int, ...]:
        """Acknowledge these pending deliveries of `agent` (None: all of them); the ids acknowledged now."""
        with immediate(self.conn):
            wanted = self._pending_ids(agent) if ids is None else list(ids)
            return self._ack(agent, wanted, by)

    def _pending_ids(self, agent: str, session: str | None = None, any_session: bool = True) -> list[int]:
        if any_session:
            rows = self.conn.execute("SELECT id FROM agent_deliveries WHERE agent = ? AND acked_ms IS NULL", (agent,))
        else:
            rows = self.conn.execute("SELECT id FROM agent_deliveries WHERE agent = ? AND acked_ms IS NULL AND "
                                     "session IS ?", (agent, session))
        return [r[0] for r in rows]

    def _ack(self, agent: str, ids: Sequence[int], by: str | None) -> tuple[int, ...]:
        ts, done = now_ms(), []
        for delivery in ids:
            cur = self.conn.execute("UPDATE agent_deliveries SET acked_ms = ?, acked_by = ? WHERE id = ? AND agent = ? "
                                    "AND acked_ms IS NULL", (ts, by, delivery, agent))
            if cur.rowcount:
                self.conn.execute("DELETE FROM agent_events WHERE delivery = ?", (delivery,))
                done.append(int(delivery))
        return tuple(done)

    def pending(self, agent: str) -> list[Delivery]:
        return [self._delivery(i) for i in self._pending_ids(agent)]

    def known(self, agent: str, ids: Iterable[int]) -> dict[int, bool]:
        """id → acknowledged already, for those of `ids` that are this agent's deliveries."""
        out = {}
        for delivery in ids:
            row = self.conn.execute("SELECT acked_ms FROM agent_deliveries WHERE id = ? AND agent = ?",
                                    (delivery, agent)).fetchone()
            if row is not None:
                out[int(delivery)] = row[0] is not None
        return out


@dataclass(frozen=True)
class AgentBacklog:
    """What waits for one agent, from the files alone."""

    agent: str
    queued: int  # heard, not yet handed
    pending: int  # handed in deliveries not yet acknowledged
    unheard: int  # in its sources beyond its cursors (heard at its next look)
    oldest_ts: int | None  # unix ms of the oldest event not acknowledged
    deliveries: int  # pending deliveries
    acked: int  # deliveries acknowledged, ever
    last_ack_ms: int | None

    @property
    def events(self) -> int:
        return self.queued + self.pending + self.unheard


def agent_backlog(b: AgentBacklog) -> dict[str, Any]:
    """An agent's backlog as the status answer carries it (times in unix ms)."""
    return {"events": b.events, "queued": b.queued, "pending": b.pending, "unheard": b.unheard,
            "deliveries": b.deliveries, "acked": b.acked, "oldest_ts": b.oldest_ts, "last_ack_ms": b.last_ack_ms}


def backlog(data: Path, agent: str, sources: Mapping[str, str], match: Mapping[str, Any] | None = None,
            cap: int = 1_000_000) -> AgentBacklog:
    """The agent's backlog, read-only (a missing agents.db reads as an agent never looked at)."""
    path = Path(data) / DB_NAME
    cursors: dict[str, Cursor] = {}
    queued = pending = deliveries = acked = 0
    oldest: int | None = None
    last_ack: int | None = None
    if path.exists():
        try:
            conn = connect_readonly(path)
        except sqlite3.Error:
            conn = None
        if conn is not None:
            try:
                cursors = {s: Cursor(i, ident, t) for s, i, ident, t in conn.execute(
                    "SELECT source, last_id, identity, ts FROM agent_cursors WHERE agent = ?", (agent,))}
                queued, pending, oldest = conn.execute(
                    "SELECT count(*) FILTER (WHERE delivery IS NULL), count(*) FILTER (WHERE delivery IS NOT NULL), "
                    "min(ts) FROM agent_events WHERE agent = ?", (agent,)).fetchone()
                deliveries, acked, last_ack = conn.execute(
                    "SELECT count(*) FILTER (WHERE acked_ms IS NULL), count(*) FILTER (WHERE acked_ms IS NOT NULL), "
                    "max(acked_ms) FROM agent_deliveries WHERE agent = ?", (agent,)).fetchone()
            except sqlite3.Error:
                pass  # a file no inbox of this version wrote yet: nothing heard
            finally:
                conn.close()
    unheard = 0
    for name, kind in sources.items():
        cursor = cursors.get(name)
        if cursor is None:
            continue  # never looked at: it starts at its first look
        spath = source_path(Path(data), kind, name)
        if not spath.exists():
            continue
        try:
            source = connect_readonly(spath)
        except sqlite3.Error:
            continue
        try:
            after = resume_after(source, kind, name, cursor, source_identity(source)).after
            count, first = count_after(source, kind, name, after, cap, match or None)
        except sqlite3.Error:
            continue
        finally:
            source.close()
        unheard += count
        if first is not None:
            oldest = first if oldest is None else min(oldest, first)
    return AgentBacklog(agent, queued or 0, pending or 0, unheard, oldest, deliveries or 0, acked or 0, last_ack)


def watched_paths(data: Path, sources: Mapping[str, str]) -> list[Path]:
    """The databases whose commits may bring an agent news: its sources' and its own inbox."""
    paths = {source_path(Path(data), kind, name) for name, kind in sources.items()}
    return sorted(paths) + [Path(data) / DB_NAME]


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery as a trace tells it: when it was made and handed, when (and by whom) acknowledged, which events."""

    id: int
    agent: str
    events: int
    created_ms: int
    handed: int
    via: str | None
    acked_ms: int | None
    acked_by: str | None
    refs: list[tuple[str, int]]


def deliveries_since(data: Path, after: int, open_ids: Iterable[int] = ()) -> list[DeliveryRecord]:
    """Deliveries made after id `after`, and those of `open_ids` (not acknowledged when last read): read-only,
    nothing when agents.db does not exist yet."""
    path = Path(data) / DB_NAME
    if not path.exists():
        return []
    conn = connect_readonly(path)
    try:
        wanted = list(open_ids)
        marks = ",".join("?" * len(wanted)) or "NULL"
        rows = conn.execute(
            "SELECT id, agent, events, created_ms, handed, via, acked_ms, acked_by, refs FROM agent_deliveries "
            f"WHERE id > ? OR id IN ({marks}) ORDER BY id LIMIT 1000", (after, *wanted)).fetchall()
    except sqlite3.OperationalError:  # a file from before deliveries named their events: none to trace yet
        return []
    finally:
        conn.close()
    return [DeliveryRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                           [(str(s), int(i)) for s, i in orjson.loads(r[8])] if r[8] else []) for r in rows]
