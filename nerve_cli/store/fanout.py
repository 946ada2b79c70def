"""Fan-out from a compute: `emit(channel, payload, key=...)` (the SDK's), committed in the compute's transaction.

`emit()` writes the event into the sense's own database (`_nerve_emits`) inside
the compute's transaction: it is kept if and only if the compute commits (a
value or KEEP), and rolled back with it (None, an exception, a timeout, a dry
run). The worker hands the committed emits to the kernel with its answer, and
the kernel stores each in data/events.db like any emit (its key: yours, or one
made from the sense and the row, so the same row is never stored twice), one
causal hop deeper than the compute (`kernel.core.causes`).

The table is the compute's record of what it emitted; the archiver moves its
old rows like any table's (`_nerve_archive`).
"""

from __future__ import annotations

import sqlite3
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from nerve_cli.clock import now_ms
from nerve_cli.errors import SenseError
from nerve_cli.store.events import check_channel, check_key, encode_payload

TABLE = "_nerve_emits"
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, "
    "payload TEXT, key TEXT, ts INTEGER NOT NULL)",
    f"INSERT OR IGNORE INTO _nerve_archive (table_name, time_column) VALUES ('{TABLE}', 'ts')",
)
MAX_EMITS = 1000  # emits one compute may make (each is an event and a line to the kernel)


@dataclass
class Outgoing:
    """The emits of one compute, in order: {id, channel, payload (JSON text), key, ts}."""

    conn: sqlite3.Connection
    sense: str
    items: list[dict[str, Any]] = field(default_factory=list)
    _ready: bool = False


_current: ContextVar[Outgoing | None] = ContextVar("nerve_compute_emits", default=None)


def emit(channel: str, payload: Any = None, key: str | None = None) -> None:
    """Emit an event to `channel` from inside a compute: stored with the compute's transaction (kept only if it
    commits), then delivered to the channel's listeners like `nerve emit`. `key`: an idempotency key (the same
    key is stored once)."""
    out = _current.get()
    if out is None:
        raise SenseError("emit() is called inside a compute (it is committed with the compute's transaction); "
                         "outside one, use `nerve emit CHANNEL` or the control socket")
    if len(out.items) >= MAX_EMITS:
        raise SenseError(f"sense `{out.sense}`: more than {MAX_EMITS} emits in one compute; emit fewer, larger "
                         "events")
    channel = check_channel(channel)
    encoded, checked = encode_payload(payload), check_key(key)
    if not out._ready:
        for sql in SCHEMA:
            out.conn.execute(sql)
        out._ready = True
    ts = now_ms()
    row = out.conn.execute(f"INSERT INTO {TABLE} (channel, payload, key, ts) VALUES (?, ?, ?, ?)",
                           (channel, encoded, checked, ts)).lastrowid
    out.items.append({"id": row, "channel": channel, "payload": encoded, "key": checked, "ts": ts})


def collecting(out: Outgoing | None) -> Any:
    """Make `out` the current compute's (returns the token `stop` takes)."""
    return _current.set(out)


def stop(token: Any) -> None:
    _current.reset(token)
