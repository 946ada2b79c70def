"""Ready-made tools for model-backed roles: what this Nerve instance observed, and a way to emit.

    from nerve_cli.sdk import llm_role, nerve_tools

    analyst = llm_role(tools=nerve_tools.READ_ONLY)   # list_senses, query_sense, recent_signals
    actor = llm_role(tools=[*nerve_tools.READ_ONLY, nerve_tools.emit])

They run in the workflow's worker, inside the role's call. The reads open the
senses' databases read-only, as `nerve mcp` does (`query_sense` is refused
anything but reading, by SQLite itself); `emit` asks the engine to store the
event (committed before it answers, its listeners woken), or, in a standalone
`nerve workflow run`, stores it for the next engine to deliver. The docstrings
and type hints are what the model reads about each tool.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.automaton.context import current_thread
from nerve_cli.config.load import load_config
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig
from nerve_cli.home import Layout
from nerve_cli.store.logs import iso_ms
from nerve_cli.store.readquery import read_query
from nerve_cli.store.sqlitefile import open_reader

QUERY_TIMEOUT = 5.0  # seconds one query may run (role_timeout bounds the whole round anyway)
MAX_SIGNALS = 200


def list_senses() -> list[dict[str, Any]]:
    """List the senses of this Nerve instance: each sense's name, group, whether it is enabled, what makes it
    run, and the tables of its SQLite database (query them with query_sense)."""
    home = _home()
    config = load_config(home)
    out = []
    for name in [*config.senses, *BUILTIN_SENSES]:
        settings = config.senses.get(name)
        out.append({"name": name, "group": settings.group if settings else "kernel",
                    "enabled": settings.enabled if settings else True, "triggers": _triggers(config, name),
                    "tables": _tables(Layout(home).sense_db(name))})
    return out


def query_sense(sense: str, sql: str, params: list[Any] | None = None, max_rows: int = 100) -> dict[str, Any]:
    """Run one read-only SQL statement (SELECT or WITH; ? placeholders filled from params) on the SQLite
    database of one sense and return its columns and rows (at most max_rows, up to 1000; truncated says when
    more matched). Its signals are in the table _signals (id, ts in unix milliseconds, payload as JSON)."""
    home = _home()
    _require_sense(home, sense)
    result = read_query(Layout(home).sense_db(sense), sql, params, max_rows=max_rows, timeout=QUERY_TIMEOUT)
    return {"sense": sense, **result.to_json()}


def recent_signals(sense: str, limit: int = 20) -> list[dict[str, Any]]:
    """The most recent signals of one sense, oldest first (at most limit, up to 200): each with its id, its
    time (ISO 8601, UTC) and its payload."""
    home = _home()
    _require_sense(home, sense)
    path = Layout(home).sense_db(sense)
    if not path.is_file():
        return []
    conn = open_reader(path)
    try:
        rows = conn.execute("SELECT id, ts, payload FROM _signals ORDER BY id DESC LIMIT ?",
                            (max(1, min(int(limit), MAX_SIGNALS)),)).fetchall()
    except sqlite3.OperationalError:  # no signal yet
        return []
    finally:
        conn.close()
    return [{"id": i, "time": iso_ms(ts), "payload": orjson.loads(p) if p else None} for i, ts, p in reversed(rows)]


async def emit(channel: str, payload: Any = None, key: str | None = None) -> dict[str, Any]:
    """Send an event to a channel of this Nerve instance: it is stored before this returns, and the senses
    listening to the channel compute. A key makes sending the same event twice store it once."""
    info = current_thread()
    if info is None or info.emit is None:
        raise RuntimeError("emit works inside a workflow thread run by Nerve")
    return await info.emit(channel, payload, key)


READ_ONLY = [list_senses, query_sense, recent_signals]
ALL = [*READ_ONLY, emit]


def _home() -> Path:
    info = current_thread()
    if info is None or info.home is None:
        raise RuntimeError("Nerve's tools work inside a workflow thread run by Nerve")
    return info.home


def _require_sense(home: Path, sense: str) -> NerveConfig:
    config = load_config(home)
    if sense not in config.senses and sense not in BUILTIN_SENSES:
        known = ", ".join([*config.senses, *BUILTIN_SENSES])
        raise ValueError(f"there is no sense {sense!r}; the senses are: {known}")
    return config


def _triggers(config: NerveConfig, name: str) -> list[str]:
    out = []
    for reflex in config.reflexes:
        if reflex.sense != name or not reflex.enabled:
            continue
        if reflex.interval is not None:
            out.append(f"every {reflex.interval:g}s")
        if reflex.cron:
            out.append(f"cron {reflex.cron}")
        out.extend(f"on {source}" for source in reflex.on)
        out.extend(f"on files {pattern}" for pattern in reflex.paths)
    return out


def _tables(path: Path) -> list[str]:
    if not path.is_file():
        return []
    conn = open_reader(path)
    try:
        # the engine's own tables (_migrations, _nerve_*) are left out; _signals is the sense's signals
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
                            "ESCAPE '\\' AND name NOT LIKE '\\_nerve\\_%' ESCAPE '\\' AND name != '_migrations' "
                            "ORDER BY name").fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    return [r[0] for r in rows]
