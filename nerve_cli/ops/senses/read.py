"""Reading a sense: a lazy one is first brought up to date, then its current value is read.

A sense with a `lazy: true` reflex is computed when it is read (`nerve sense
show`, the MCP reads): while its sources hold events it has not consumed (for
these parameter values, when it binds parameters), it computes — through the
running engine, which coalesces with whatever else wants it, or, with none, in
one-off workers as `nerve sense compute` does — each compute consuming its
events exactly once in its own transaction. When nothing waits, nothing runs.

Its *value* is then what its last signalling compute returned: for a sense
with parameters, that set of values' own (`_nerve_bindings`), else its newest
signal.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from nerve_cli.config.projection import Reading, reading
from nerve_cli.home import Layout
from nerve_cli.names import binding_key
from nerve_cli.ops.client import engine_running, read
from nerve_cli.ops.senses.inspect import require_sense
from nerve_cli.ops.senses.standalone import catch_up
from nerve_cli.store.bindings import all_bindings, read_binding
from nerve_cli.store.events import connect_readonly
from nerve_cli.wire.protocol import ErrorInfo


@dataclass(frozen=True)
class Read:
    """What reading a sense did, and its value after."""

    sense: str
    lazy: bool
    bind: dict[str, Any] | None
    params: tuple[str, ...]  # the parameters the sense takes
    computes: int = 0  # computes it took to bring it up to date
    events: int = 0  # events they consumed
    via: str | None = None  # engine | worker, when anything ran
    error: ErrorInfo | None = None
    more: bool = False  # still behind after the most computes one read takes
    value: Any = None
    value_ts: int | None = None
    known: tuple[dict[str, Any], ...] = ()  # a sense with parameters read without them: the values read so far


def how_read(home: Path, name: str) -> Reading:
    return reading(require_sense(home, name), name)


def read_sense(home: Path, name: str, bind: dict[str, Any] | None = None, *,
               stderr: int | IO[Any] | None = None) -> Read:
    """Bring `name` up to date when it is lazy (for `bind`'s values), then read its value."""
    how = how_read(home, name)
    base = Read(name, how.is_lazy, bind or None, how.params)
    if not (how.is_lazy or how.params or bind):
        return base  # read as it is: nothing to bring up to date
    if how.params and not bind:  # which of its projections? none is read; the ones read so far are listed
        return Read(**{**base.__dict__, "known": tuple(_known(home, name))})
    how.filters(bind)  # BindError: the values do not fit its parameters
    if how.is_lazy:
        base = _via_engine(home, base) if engine_running(home) else _standalone(home, base, stderr)
    value, value_ts = current_value(home, name, bind)
    return Read(**{**base.__dict__, "value": value, "value_ts": value_ts})


def _via_engine(home: Path, base: Read) -> Read:
    answer = read(home, base.sense, base.bind)
    error = answer.get("error")
    return Read(**{**base.__dict__, "computes": answer["computes"], "events": answer["events"], "via": "engine",
                   "error": ErrorInfo(**error) if error else None, "more": bool(answer.get("more"))})


def _standalone(home: Path, base: Read, stderr: Any) -> Read:
    done = catch_up(home, base.sense, base.bind, stderr=stderr)
    return Read(**{**base.__dict__, "computes": done.computes, "events": done.events,
                   "via": "worker" if done.computes else None, "error": done.error, "more": done.more})


def current_value(home: Path, name: str, bind: dict[str, Any] | None = None) -> tuple[Any, int | None]:
    """(value, its time in unix ms) of a sense, for `bind`'s values when it has parameters; (None, None) before any."""
    path = Layout(home).sense_db(name)
    if not path.exists():
        return None, None
    conn = connect_readonly(path)
    try:
        key = binding_key(bind)
        if key is not None:
            _, value, value_ts = read_binding(conn, key)
            return value, value_ts
        row = conn.execute("SELECT ts, payload FROM _signals ORDER BY id DESC LIMIT 1").fetchone()
        return (orjson.loads(row[1]), row[0]) if row else (None, None)
    except sqlite3.OperationalError:
        return None, None
    finally:
        conn.close()


def _known(home: Path, name: str) -> list[dict[str, Any]]:
    path = Layout(home).sense_db(name)
    if not path.exists():
        return []
    conn = connect_readonly(path)
    try:
        return all_bindings(conn)
    finally:
        conn.close()
