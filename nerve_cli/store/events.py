"""Events: external ones in `data/events.db`, and the consumption cursors kept in each sense's database.

An *event* is anything a sense's `on:` list can name: a signal of another
sense (a row of that sense's `_signals`) or an external event sent to a
channel with `nerve emit` (a row of `events` here). Ids only grow within a
source (both tables are AUTOINCREMENT, so archiving the newest rows never
lets an id come back).

- `EventStore` is the writer of events.db: the engine (group commit, one
  transaction per batch) and `nerve emit` when no engine runs. An event is
  committed before anyone is told about it; an optional `key` makes a resend
  of the same event (a client that lost its answer) a no-op.
- The cursor of one listener on one source is a row of the listener's own
  `_nerve_cursors(source, last_id, ts)`: the id of the last event a compute
  consumed. It is written inside the compute's transaction, so it moves if and
  only if the compute committed (see `worker.events`).
- `has_backlog` answers, from the files alone, whether a listener has events
  it has not consumed (the kernel asks at start-up and after a failed compute).
- `Event`, `Trigger` and `KEEP` are what a compute sees of all this (the SDK
  re-exports them; `worker.events` reads the events and builds the trigger).

Durability: WAL with `synchronous=NORMAL`, like every database here. A commit
survives the death of any process (kernel, worker, CLI); a power cut or OS
crash may lose the last commits. `synchronous=FULL` would add an fsync to each
commit (p99 ≈ 8 ms on the reference machine) for that last case.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

import orjson

from nerve_cli.clock import now_ms
from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.names import channel_problem, pattern_matches, pattern_prefix
from nerve_cli.schema import views
from nerve_cli.schema.apply import IDENTITY_SQL
from nerve_cli.store.bindings import read_binding, where
from nerve_cli.store.cursor import Cursor
from nerve_cli.store.files import FILE_SCHEMA
from nerve_cli.store.logview import LogReader
from nerve_cli.store.sqlitefile import BUSY_TIMEOUT_MS, DamagedDatabase, DamagedRead, check_file, open_reader, open_writer
from nerve_cli.vocab.reasons import TriggerKind
from nerve_cli.vocab.sources import CursorJump, SourceKind
from nerve_cli.wire.protocol import MAX_PAYLOAD, payload_too_large

MAX_KEY = 200  # characters in an idempotency key
CURSORS = "_nerve_cursors"

MAX_SCHEMA_VERSION = 64  # characters in an event's schema version
HASH_PREFIX = "sha256:"

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, "
    "payload TEXT, ts INTEGER NOT NULL, key TEXT, origin TEXT, via TEXT, schema_version TEXT, hash TEXT)",
    "CREATE INDEX IF NOT EXISTS idx_events_channel ON events(channel, id)",
    "CREATE INDEX IF NOT EXISTS idx_events_ts ON events(ts)",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_events_key ON events(key) WHERE key IS NOT NULL",
    # the archiver treats events.db like a sense database: tables by their time column
    "CREATE TABLE IF NOT EXISTS _nerve_archive (table_name TEXT PRIMARY KEY, time_column TEXT NOT NULL)",
    "INSERT OR IGNORE INTO _nerve_archive (table_name, time_column) VALUES ('events', 'ts')",
    *IDENTITY_SQL,  # a listener's cursor on a channel remembers which events.db it counted in
)

# Columns added after the first release, each with the statement that adds it to an older events.db.
ADDED_COLUMNS = {
    "origin": "ALTER TABLE events ADD COLUMN origin TEXT",  # the fleet host it was received from; NULL: here
    "via": "ALTER TABLE events ADD COLUMN via TEXT",  # how it arrived here: webhook; NULL: nerve emit, socket, MCP
    "schema_version": "ALTER TABLE events ADD COLUMN schema_version TEXT",  # what its emitter said; NULL: nothing
    "hash": "ALTER TABLE events ADD COLUMN hash TEXT",  # sha256: of its payload, when its emitter asked
}
# the events received from each fleet host (few among many local ones): `nerve fleet` reads them per host
ORIGIN_INDEX = "CREATE INDEX IF NOT EXISTS idx_events_origin ON events(origin, id) WHERE origin IS NOT NULL"


# -- what a compute receives (the SDK re-exports these; worker.events builds them) ----

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

    source: str  # a sense, a channel, or a file reflex's path pattern
    id: int  # grows within a source
    ts: int  # unix ms when it was stored
    payload: Any  # for kind "file": {"path", "change" (added, modified, deleted), "size", "mtime_ms"}
    kind: str  # "sense" | "channel" | "file"
    schema_version: str | None = None  # what the emitter said its payload's schema is (`--schema-version`)
    hash: str | None = None  # "sha256:<hex>" of the payload's canonical JSON, when the emitter asked for it


@dataclass(frozen=True)
class Trigger:
    """Why this compute runs and the events it receives (see the module docstring)."""

    reason: TriggerKind  # interval | cron | overdue | signal | debounced | files | demand | read | backlog | retry
    source: str | None = None  # for signal/debounced: the source whose event woke it; for files: the pattern
    events: tuple[Event, ...] = ()
    sources: tuple[str, ...] = ()  # the sense's `on:` sources
    more: bool = False  # more events wait beyond this batch; another compute follows at once
    compute_id: int = 0
    home: Path | None = field(default=None, repr=False)
    _log: list = field(default_factory=list, repr=False, compare=False)
    params: Mapping[str, Any] = field(default_factory=dict)  # the values a read bound to the sense's parameters

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def log(self) -> "LogReader":
        """A read-only handle on the engine's Log (logs and workflow_runs, archived days on request)."""
        if not self._log:
            if self.home is None:
                raise RuntimeError("this trigger was built without an instance folder; it has no Log")
            self._log.append(LogReader(self.home))
        return self._log[0]


class EventError(NerveError):
    """An event that cannot be stored as given (bad channel, payload not JSON or too large)."""

    type = ErrorType.EVENT_ERROR


class PayloadTooLarge(EventError):
    """A payload over MAX_PAYLOAD bytes of compact JSON (the one size rule)."""

    type = ErrorType.EVENT_ERROR


class EventNotStored(EventError):
    """The store refused the write (disk full, the lock held too long): nothing was stored, send it again."""

    type = ErrorType.STORAGE_ERROR


@dataclass(frozen=True)
class StoredEvent:
    id: int
    channel: str
    ts: int
    duplicate: bool = False  # its key was already stored: this is the earlier event
    origin: str | None = None  # the fleet host it came from; None: emitted on this host
    via: str | None = None  # how it arrived here when not by nerve emit, the socket or MCP: "webhook"
    schema_version: str | None = None
    hash: str | None = None
    traceparent: str | None = None  # the W3C trace context it was sent with (kept in memory, not stored)
    cause: Any = None  # its causal depth and path (kernel.core.causes.Cause; kept in memory, not stored)


# (channel, payload JSON, key), with the origin host, how it arrived here, its schema version and content hash
Item = (tuple[str, "str | None", "str | None"] | tuple[str, "str | None", "str | None", "str | None"]
        | tuple[str, "str | None", "str | None", "str | None", "str | None"]
        | tuple[str, "str | None", "str | None", "str | None", "str | None", "str | None", "str | None"])


def check_channel(channel: Any) -> str:
    """A channel name as `on:` accepts it (names.channel_problem: the one rule), or EventError."""
    problem = channel_problem(channel)
    if problem is not None:
        shown = repr(channel)[:60] + ("…" if len(repr(channel)) > 60 else "")
        raise EventError(f"{problem} ({shown}); use the name a reflex lists under on:, e.g. task.created")
    return channel


def check_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise EventError(f"an event key is a non-empty string of at most {MAX_KEY} characters, got {str(key)[:60]!r}")
    return key


def check_schema_version(value: Any) -> str | None:
    """An event's schema version as the emitter gave it: free text (`1`, `v1.0`, `2026-08`), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EventError(f"an event's schema version is text such as 1 or v1.0, got {value!r}")
    text = str(value)
    if not text or len(text) > MAX_SCHEMA_VERSION or any(ord(c) < 32 or c.isspace() for c in text):
        raise EventError(f"an event's schema version is 1 to {MAX_SCHEMA_VERSION} characters without spaces or "
                         f"control characters, such as 1 or v1.0; got {text[:60]!r}")
    return text


def content_hash(payload: Any) -> str:
    """`sha256:<hex>` of the payload as canonical JSON: keys sorted, no spaces, UTF-8 (null for no payload)."""
    data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def encode_payload(value: Any, what: str = "the event payload") -> str | None:
    """A payload as stored JSON text (None stays NULL), refused past MAX_PAYLOAD bytes.

    The one size rule, for signals and events, CLI and engine alike: the bytes of
    the payload's compact UTF-8 JSON (orjson's, which writes no \\u escapes).
    """
    if value is None:
        return None
    try:
        data = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise EventError(f"{what} cannot be stored as JSON: {exc}") from None
    if len(data) > MAX_PAYLOAD:
        raise PayloadTooLarge(payload_too_large(len(data), f"{what} is"))
    return data.decode()


def parse_payload_text(text: str, what: str = "the payload") -> Any:
    """JSON text from a user (command line or stdin) → value, refused when not JSON or too large.

    Its size is counted as everywhere else (`encode_payload`): the bytes of its
    compact UTF-8 JSON, as stored, whatever spaces or escapes the text has.
    """
    size = len(text.encode())
    if size > 4 * MAX_PAYLOAD:  # no spacing makes this much text fit: refused unparsed
        raise PayloadTooLarge(payload_too_large(size, f"{what} is"))
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise EventError(f"{what} is not valid JSON ({exc}); quote it for the shell, e.g. '{{\"id\": 7}}'") from None
    encode_payload(value, what)
    return value


def connect(path: Path) -> sqlite3.Connection:
    """The writer connection of events.db (created private, with its schema, if missing), by whoever writes first."""
    path = Path(path)
    conn = open_writer(path, fix=damage_fix(path))
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in (*SCHEMA, *FILE_SCHEMA):
            conn.execute(statement)
        have = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
        for column, statement in ADDED_COLUMNS.items():
            if column not in have:  # an events.db from before it
                conn.execute(statement)
        conn.execute(ORIGIN_INDEX)
        conn.execute("COMMIT")
        views.sync(conn, views.EVENTS_VIEWS)  # `time` beside `ts`, like every database here
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()
        raise
    return conn


def damage_fix(path: Path) -> str:
    """What to do about a damaged events.db."""
    return (f"restore it from a backup, or move it aside (`mv {path} {path}.damaged`) to start a new, empty one "
            "(events not yet consumed by their listeners are then not delivered)")


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A reader of a source's database. A damaged file raises DamagedRead, an sqlite3.DatabaseError too: the
    readers of events (a listener's compute, the ledger, backlog checks) treat it as unreadable for now, and
    its own sense's worker reports the damage."""
    try:
        conn = open_reader(Path(path), isolation_level=None, check_same_thread=False)
    except DamagedDatabase as exc:
        if isinstance(exc, sqlite3.DatabaseError):
            raise
        raise DamagedRead(str(exc)) from None
    with_patterns(conn)
    return conn


def with_patterns(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`conn` with `nerve_subject(pattern, channel)`: the SQL side of `on: [pr.*]` (names.pattern_matches)."""
    conn.create_function("nerve_subject", 2, pattern_matches, deterministic=True)
    return conn


def pattern_scope(pattern: str) -> tuple[str, list[Any]]:
    """The WHERE terms (ending in AND) that keep the events of the channels `pattern` matches: a range over its
    literal prefix (cheap comparisons that spare most other channels the token match), then the match itself.
    SQLite walks the ids after the cursor (the rowid), so a read costs the events stored since it, of any channel."""
    prefix = pattern_prefix(pattern)
    if not prefix:
        return "nerve_subject(?, channel) AND ", [pattern]
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # every name starting with `prefix` sorts below this
    return "channel >= ? AND channel < ? AND nerve_subject(?, channel) AND ", [prefix, upper, pattern]


class EventStore:
    """The writer of data/events.db. Not thread-safe: one thread at a time writes."""

    def __init__(self, path: Path, *, autocheckpoint: bool = True, wait: bool = True) -> None:
        """`wait=False`: an append raises at once (sqlite3.OperationalError, "database is locked") when another
        writer holds the database, instead of waiting up to the busy timeout."""
        self.path = Path(path)
        self.conn = connect(self.path)
        if not autocheckpoint:  # the caller checkpoints elsewhere (a checkpoint fsyncs; the engine's loop must not)
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        if not wait:
            self.conn.execute("PRAGMA busy_timeout = 0")

    def append(self, items: Iterable[Item]) -> list[StoredEvent]:
        """Store (channel, payload JSON, key[, origin[, via[, schema_version, hash]]]) in one transaction, in
        order; every one is committed on return. `origin` is the fleet host an event was received from (None:
        emitted here); `via` how it arrived here when not by nerve emit, the socket or MCP ("webhook");
        `schema_version` and `hash` what its emitter gave (store.events.new_event).

        An item whose key is already stored is not stored again: its answer is
        the earlier event, marked `duplicate`.
        """
        out: list[StoredEvent] = []
        conn = self.conn
        ts = now_ms()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for channel, payload, key, *rest in items:
                origin, via, schema_version, digest = (*rest, None, None, None, None)[:4]
                # looked up first, not left to ON CONFLICT: a refused INSERT still
                # burns an AUTOINCREMENT id, and a resend would leave a gap in the ids
                row = key is not None and conn.execute(
                    "SELECT id, channel, ts, origin, via, schema_version, hash FROM events WHERE key = ?",
                    (key,)).fetchone()
                if row:
                    out.append(StoredEvent(row[0], row[1], row[2], True, *row[3:]))
                    continue
                cur = conn.execute("INSERT INTO events (channel, payload, ts, key, origin, via, schema_version, hash) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                   (channel, payload, ts, key, origin, via, schema_version, digest))
                out.append(StoredEvent(cur.lastrowid or 0, channel, ts, False, origin, via, schema_version, digest))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return out

    def after(self, event_id: int) -> list[dict[str, Any]]:
        """Events with an id above `event_id`, oldest first (start-up recovery of their log rows)."""
        rows = self.conn.execute("SELECT id, channel, payload, ts, origin, schema_version, hash FROM events "
                                 "WHERE id > ? ORDER BY id", (event_id,))
        return [{"id": i, "channel": c, "payload": p, "ts": t, "origin": o, "schema_version": v, "hash": h}
                for i, c, p, t, o, v, h in rows]

    def close(self) -> None:
        self.conn.close()


def received_by_host(path: Path) -> dict[str, dict[str, Any]]:
    """host → {"events", "last_ts", "last_channel"} of the events received from each fleet host and still held
    (not archived), read from the file alone."""
    if not Path(path).exists():
        return {}
    conn = connect_readonly(path)
    try:
        counts = conn.execute("SELECT origin, count(*), max(id) FROM events WHERE origin IS NOT NULL GROUP BY origin")
        out = {}
        for host, count, last in counts.fetchall():
            channel, ts = conn.execute("SELECT channel, ts FROM events WHERE id = ?", (last,)).fetchone()
            out[host] = {"events": count, "last_ts": ts, "last_channel": channel}
        return out
    except sqlite3.OperationalError:  # an events.db from before the fleet: nothing was received
        return {}
    finally:
        conn.close()


def checkpoint(path: Path) -> None:
    """Copy events.db's WAL into the database (PASSIVE: never waits for readers or writers), on its own connection."""
    check_file(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        conn.close()


def events_after(path: Path, event_id: int, below: int | None = None) -> list[dict[str, Any]]:
    """Events with an id above `event_id` (and below `below`), oldest first, read-only (an events.db of any age:
    missing columns read as None). [] while the database or its table does not exist."""
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return []
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM events WHERE id > ? AND id < ? ORDER BY id",
                            (event_id, below if below is not None else 2**63 - 1)).fetchall()
    except sqlite3.Error:  # no such table yet, or unreadable now: the next look will see
        return []
    finally:
        conn.close()
    return [{"id": r["id"], "channel": r["channel"], "payload": r["payload"], "ts": r["ts"],
             **{c: r[c] if c in r.keys() else None for c in ADDED_COLUMNS}} for r in rows]


def new_event(channel: Any, payload: Any, key: Any = None, schema_version: Any = None, hashed: bool = False,
              origin: str | None = None, via: str | None = None) -> Item:
    """An event checked and encoded for `EventStore.append`; EventError for one that cannot be stored as given."""
    return (check_channel(channel), encode_payload(payload), check_key(key), origin, via,
            check_schema_version(schema_version), content_hash(payload) if hashed else None)


def store_event(path: Path, channel: str, payload: Any, key: str | None = None, schema_version: str | None = None,
                hashed: bool = False) -> StoredEvent:
    """Store one event with no engine running (`nerve emit` offline): committed when this returns."""
    store = EventStore(path)
    try:
        return store.append([new_event(channel, payload, key, schema_version, hashed)])[0]
    finally:
        store.close()


# -- cursors (in the listener's own database) ----------------------------------

def read_cursors(conn: sqlite3.Connection) -> dict[str, Cursor]:
    try:
        return {s: Cursor(i, ident, ts) for s, i, ident, ts in
                conn.execute(f"SELECT source, last_id, identity, ts FROM {CURSORS}")}
    except sqlite3.OperationalError:  # a database from before cursors (or their identities) existed
        try:
            return {s: Cursor(i) for s, i in conn.execute(f"SELECT source, last_id FROM {CURSORS}")}
        except sqlite3.OperationalError:  # nothing consumed yet
            return {}


def write_cursors(conn: sqlite3.Connection, cursors: Mapping[str, Cursor], ts: int) -> None:
    """Inside the caller's transaction."""
    conn.executemany(
        f"INSERT INTO {CURSORS} (source, last_id, ts, identity) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(source) DO UPDATE SET last_id = excluded.last_id, ts = excluded.ts, identity = excluded.identity",
        [(source, c.last_id, ts, c.identity) for source, c in cursors.items()],
    )


def source_identity(conn: sqlite3.Connection) -> str | None:
    """The identity of a source database (schema.apply.IDENTITY_SQL), or None: none yet, or unreadable."""
    try:
        row = conn.execute("SELECT id FROM _nerve_identity LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


class Resume(NamedTuple):
    """Where a read of a source goes on from a cursor: after `after`; `why` it is not the cursor's own place."""

    after: int
    why: CursorJump | None = None


def resume_after(conn: sqlite3.Connection, kind: str, name: str, cursor: Cursor | None, identity: str | None,
                 listener: str = "") -> Resume:
    """Where a listener reads `name` from, given its cursor (None: it never read it: from the start).

    A source rebuilt since (another identity) is read from its start. A source behind its cursor in the same
    database (a copy of an earlier state put back, e.g. from `nerve backup`: its ids go on from the copy's
    newest) is read after the last event the listener had when it wrote its cursor: the events the copy
    holds past that were made after the cursor, new to the listener (their ids may be ones it had from the
    lost lineage); what the lost lineage held past the copy is gone with it."""
    if cursor is None:
        return Resume(0)
    top = head(conn, kind)
    if rebuilt(cursor, identity, top):
        return Resume(0, CursorJump.REBUILT)
    if cursor.last_id > top:
        return Resume(_had_when(conn, kind, name, cursor.ts, top, listener), CursorJump.RESTORED)
    return Resume(cursor.last_id)


def _had_when(conn: sqlite3.Connection, kind: str, name: str, ts: int | None, top: int, listener: str) -> int:
    """The newest id up to `top` of events stored by `ts` (unix ms); no time known: `top`."""
    if ts is None:
        return top
    table = SOURCE_TABLES[kind]
    scope, params = source_scope(kind, name, listener)
    try:
        row = conn.execute(f"SELECT max(id) FROM {table} WHERE {scope}id <= ? AND ts <= ?",
                           (*params, top, ts)).fetchone()
    except sqlite3.Error:
        return top
    return int(row[0]) if row and row[0] is not None else 0


def rebuilt(cursor: Cursor | None, identity: str | None, top: int) -> bool:
    """Whether the source a cursor counted in was rebuilt since: another identity, or (a cursor from before
    identities) an id past the newest the source ever gave. Its ids then start again at 1."""
    if cursor is None:
        return False
    if cursor.identity is not None and identity is not None:
        return cursor.identity != identity
    return cursor.last_id > top


# -- reading one source ----------------------------------------------------------

SOURCE_TABLES: dict[str, str] = {SourceKind.CHANNEL: "events", SourceKind.FILE: "file_events", SourceKind.SENSE: "_signals",
                                 SourceKind.PATTERN: "events"}


def source_scope(kind: str, name: str, listener: str = "") -> tuple[str, list[Any]]:
    """The WHERE terms (ending in AND, or empty) that keep one source's rows of its table."""
    if kind == SourceKind.CHANNEL:
        return "channel = ? AND ", [name]
    if kind == SourceKind.PATTERN:
        return pattern_scope(name)
    if kind == SourceKind.FILE:
        return "sense = ? AND pattern = ? AND ", [listener, name]
    return "", []


def head(conn: sqlite3.Connection, kind: str) -> int:
    """The highest id a source ever gave (archived rows included): `sqlite_sequence` of its table."""
    table = SOURCE_TABLES[kind]
    try:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    except sqlite3.Error:  # no table yet, or a damaged file (reported by whoever opens it for writing)
        return 0
    return int(row[0]) if row else 0


def last_signal_ms(path: Path) -> int | None:
    """When a sense last signalled (unix ms, from its `_signals`), or None: never, or no readable database."""
    if not Path(path).exists():
        return None
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return None
    try:
        return conn.execute("SELECT max(ts) FROM _signals").fetchone()[0]
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def read_source(conn: sqlite3.Connection, kind: str, name: str, after: int, limit: int, listener: str = "",
                wanted: Mapping[str, Any] | None = None) -> list[tuple[int, int, str | None, str | None, str | None]]:
    """(id, ts, payload JSON, schema_version, hash) of up to `limit` events of one source with id > `after`,
    oldest first, and only those whose payload has the `wanted` values (bindings; see store.bindings).
    External events carry the schema version and hash their emitter gave, a sense's signals those its
    settings ask for (`signal_version`, `signal_hash`).

    A file source (`name`, a path pattern) is the listener's own: `listener` names it."""
    narrow, narrow_params = where(wanted)
    if kind == SourceKind.PATTERN:
        return [row[:5] for row in read_pattern(conn, name, after, limit, wanted)]
    try:
        if kind == SourceKind.CHANNEL:
            sql = (f"SELECT id, ts, payload, schema_version, hash FROM events WHERE channel = ? AND id > ?{narrow} "
                   "ORDER BY id LIMIT ?")
            try:
                return conn.execute(sql, (name, after, *narrow_params, limit)).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such column" not in str(exc):
                    raise
                # an events.db no engine of this version has written yet: its events have neither
                sql = (f"SELECT id, ts, payload, NULL, NULL FROM events WHERE channel = ? AND id > ?{narrow} "
                       "ORDER BY id LIMIT ?")
                return conn.execute(sql, (name, after, *narrow_params, limit)).fetchall()
        if kind == SourceKind.FILE:
            sql = (f"SELECT id, ts, payload, NULL, NULL FROM file_events WHERE sense = ? AND pattern = ? AND id > ?"
                   f"{narrow} ORDER BY id LIMIT ?")
            return conn.execute(sql, (listener, name, after, *narrow_params, limit)).fetchall()
        sql = f"SELECT id, ts, payload, schema_version, hash FROM _signals WHERE id > ?{narrow} ORDER BY id LIMIT ?"
        try:
            return conn.execute(sql, (after, *narrow_params, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such column" not in str(exc):
                raise
            # a database no worker of this version has opened yet (or a built-in sense's): its signals have neither
            sql = f"SELECT id, ts, payload, NULL, NULL FROM _signals WHERE id > ?{narrow} ORDER BY id LIMIT ?"
            return conn.execute(sql, (after, *narrow_params, limit)).fetchall()
    except sqlite3.OperationalError:  # its table does not exist yet: nothing to read
        return []


def read_pattern(conn: sqlite3.Connection, pattern: str, after: int, limit: int,
                 wanted: Mapping[str, Any] | None = None) -> list[tuple[int, int, str | None, str | None, str | None, str]]:
    """As `read_source`, for the channels a subject pattern matches: each row ends with its own channel (the
    event's real source). One cursor counts them all: they share events.db's ids."""
    scope, params = pattern_scope(pattern)
    narrow, narrow_params = where(wanted)
    sql = (f"SELECT id, ts, payload, schema_version, hash, channel FROM events WHERE {scope}id > ?{narrow} "
           "ORDER BY id LIMIT ?")
    try:
        return conn.execute(sql, (*params, after, *narrow_params, limit)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such column" in str(exc):  # an events.db no engine of this version has written yet
            old = sql.replace("schema_version, hash,", "NULL, NULL,")
            return conn.execute(old, (*params, after, *narrow_params, limit)).fetchall()
        return []  # no events table yet: nothing to read


def identity_of(data: Path, kind: str, name: str) -> str | None:
    """The identity of a source's database now (None while it has none, or is missing or unreadable)."""
    path = source_path(data, kind, name)
    if not path.exists():
        return None
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return None
    try:
        return source_identity(conn)
    finally:
        conn.close()


def last_id_before(conn: sqlite3.Connection, kind: str, since_ms: int) -> int:
    """The highest id of the source's table stored before `since_ms` (0 when none): what came after is newer.

    Read backwards from the newest row, so a recent `since_ms` costs a few rows whatever the table's size.
    """
    table = "events" if kind == SourceKind.CHANNEL else "_signals"
    try:
        row = conn.execute(f"SELECT id FROM {table} WHERE ts < ? ORDER BY id DESC LIMIT 1", (since_ms,)).fetchone()
    except sqlite3.OperationalError:  # its table does not exist yet: nothing came before
        return 0
    return int(row[0]) if row else 0


def source_path(data: Path, kind: str, name: str) -> Path:
    """Where a source's events live: data/events.db (channels, files), or the sense's own database."""
    return data / "events.db" if kind != SourceKind.SENSE else data / "senses" / f"{name}.db"


BACKLOG_CAP = 1_000_000  # events counted per source; more reads as "at least this many"


@dataclass(frozen=True)
class SourceBacklog:
    """What one listener has not consumed yet of one source."""

    source: str
    kind: str  # sense | channel | file
    cursor: int  # the id of the last event it consumed (0: none)
    events: int  # waiting events (capped at BACKLOG_CAP)
    oldest_ts: int | None  # unix ms of the oldest waiting one
    head: int  # the newest id the source ever gave


def backlog(data: Path, listener: str, sources: Mapping[str, str], cap: int = BACKLOG_CAP,
            filters: Mapping[str, Any] | None = None, binding: str | None = None) -> list[SourceBacklog]:
    """Per source of `listener`: its cursor, how many events wait beyond it and since when, from the files alone.

    `filters`: the sources' bindings (only matching events count); `binding`: the set of parameter values
    whose cursors count (store.bindings), instead of the sense's own.
    """
    own = data / "senses" / f"{listener}.db"
    cursors: dict[str, Cursor] = {}
    if own.exists():
        try:
            conn = connect_readonly(own)
            try:
                cursors = read_cursors(conn) if binding is None else read_binding(conn, binding)[0]
            finally:
                conn.close()
        except sqlite3.Error:
            pass  # unreadable now: counted from 0, as the listener itself would read it
    out = []
    for name, kind in sources.items():
        path = source_path(data, kind, name)
        cursor = cursors.get(name)
        found = SourceBacklog(name, kind, cursor.last_id if cursor else 0, 0, None, 0)
        if path.exists():
            try:
                conn = connect_readonly(path)
                try:
                    found = _waiting(conn, listener, name, kind, cursor, cap, (filters or {}).get(name))
                finally:
                    conn.close()
            except sqlite3.Error:
                pass  # unreadable now: the next look will tell
        out.append(found)
    return out


def _waiting(conn: sqlite3.Connection, listener: str, name: str, kind: str, at: Cursor | None,
             cap: int, wanted: Mapping[str, Any] | None = None) -> SourceBacklog:
    top = head(conn, kind)
    cursor = at.last_id if at is not None else 0
    after = 0 if rebuilt(at, source_identity(conn), top) else cursor  # rebuilt: its ids started again
    table = SOURCE_TABLES[kind]
    of, params = source_scope(kind, name, listener)
    narrow, narrow_params = where(wanted)
    try:
        count = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {of}id > ?{narrow} LIMIT ?)",
                             (*params, after, *narrow_params, cap)).fetchone()[0]
        oldest = conn.execute(f"SELECT ts FROM {table} WHERE {of}id > ?{narrow} ORDER BY id LIMIT 1",
                              (*params, after, *narrow_params)).fetchone()
    except sqlite3.OperationalError:  # its table does not exist yet: nothing waits
        return SourceBacklog(name, kind, cursor, 0, None, top)
    return SourceBacklog(name, kind, cursor, count, oldest[0] if oldest else None, top)


def count_after(conn: sqlite3.Connection, kind: str, name: str, after: int, cap: int = BACKLOG_CAP,
                wanted: Mapping[str, Any] | None = None, listener: str = "") -> tuple[int, int | None]:
    """(how many events of one source have an id above `after`, capped; the ts of the oldest of them)."""
    found = _waiting(conn, listener, name, kind, Cursor(after), cap, wanted)
    return found.events, found.oldest_ts


def has_backlog(data: Path, listener: str, sources: Mapping[str, str], filters: Mapping[str, Any] | None = None,
                binding: str | None = None) -> bool:
    """True when `listener` has events it has not consumed, judging from the files alone.

    `filters`: the sources' bindings (only matching events count); `binding`: the set of parameter values
    whose cursors count (store.bindings), instead of the sense's own.
    """
    return any(b.events for b in backlog(data, listener, sources, cap=1, filters=filters, binding=binding))
