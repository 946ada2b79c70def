"""What `nerve sense list` and `nerve sense show` display, read without importing user code.

Sense databases are opened read-only; a sense that never ran has no database
and reads as "never". Works the same whether or not an engine is running (WAL).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.config.code import check_code
from nerve_cli.config.load import load_config
from nerve_cli.config.model import (
    BUILTIN_SENSES,
    HEALTH_SENSE,
    THREADS_SENSE,
    NerveConfig,
    ReflexConfig,
    SenseConfig,
    format_duration,
)
from nerve_cli.config.rules import hint
from nerve_cli.errors import NerveError, SenseError, UnknownSense
from nerve_cli.home import Layout
from nerve_cli.ops.client import request
from nerve_cli.ops.senses.rows import read_rows
from nerve_cli.store.history import archived_counts, last_archived_signal, sense_history
from nerve_cli.store.quarantines import load_quarantines
from nerve_cli.store.sqlitefile import open_reader

SPARKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class SenseSummary:
    name: str
    group: str
    enabled: bool
    triggers: list[str]
    last_signal_ts: int | None
    signal_count: int  # archived signals included
    last_payload: Any = None  # the newest signal's payload in the database (None before the first)


@dataclass(frozen=True)
class SenseDetail:
    summary: SenseSummary
    config: dict[str, Any]
    peers: list[str]
    tables: list[dict[str, Any]]  # {"name", "rows", "archived_rows", "engine"}: user tables, then engine tables
    signals: list[dict[str, Any]]  # {"id", "ts", "payload"}, oldest first
    readers: list[str] = field(default_factory=list)  # senses that list this one as a peer
    blocked: dict[str, Any] | None = None  # {"state": penalised|quarantined, "until": epoch s, "why"}
    recent_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # own table → its newest rows
    problem: dict[str, Any] | None = None  # why it would not load (drift, syntax error): {file, line, message}


def describe_trigger(reflex: ReflexConfig) -> list[str]:
    out = []
    if reflex.interval is not None:
        out.append(f"every {format_duration(reflex.interval)}")
    if reflex.cron:
        out.append(f"cron {reflex.cron}")
    out.extend(f"on {name}" for name in reflex.on)
    out.extend(f"on files {pattern}" for pattern in reflex.paths)
    if not reflex.enabled:
        out = [f"{t} (disabled)" for t in out]
    return out


def triggers_of(config: NerveConfig, name: str) -> list[str]:
    if name == HEALTH_SENSE:
        return [f"every {format_duration(config.engine.health_interval)} (engine.health_interval)"]
    if name == THREADS_SENSE:
        return ["on every workflow thread's change of status"]
    return [t for r in config.reflexes if r.sense == name for t in describe_trigger(r)]


def settings_of(config: NerveConfig, name: str) -> SenseConfig:
    """A sense's settings; a built-in sense's are the kernel's (group `kernel`, never disabled)."""
    return config.senses[name] if name in config.senses else SenseConfig(group="kernel")


def list_senses(home: Path) -> list[SenseSummary]:
    config = load_config(home)
    layout = Layout(home)
    return [_summary(layout, config, name) for name in config.senses]


def require_sense(home: Path, name: str, config: NerveConfig | None = None) -> NerveConfig:
    """The instance's config (`config`, when the caller has read it), once `name` is known to be one of its senses
    or a built-in one (else a 'did you mean' error)."""
    config = load_config(home) if config is None else config
    if name not in config.senses and name not in BUILTIN_SENSES:
        raise UnknownSense(f"no sense `{name}` in nerve.yaml{hint(name, [*config.senses, *BUILTIN_SENSES])}")
    return config


def show_sense(home: Path, name: str, last: int = 10, rows: int = 5, *, check_code: bool = True,
               config: NerveConfig | None = None) -> SenseDetail:
    config = require_sense(home, name, config)
    layout = Layout(home)
    settings = settings_of(config, name)
    archived = archived_counts(home, name)
    tables = _tables(layout.sense_db(name), archived)
    return SenseDetail(
        summary=_summary(layout, config, name, archived),
        config=settings.model_dump(mode="json", exclude_defaults=False),
        peers=list(settings.peers),
        tables=tables,
        signals=recent_signals(home, name, last),
        readers=[n for n, s in config.senses.items() if name in s.peers],
        blocked=blocked_state(home, name),
        recent_rows={t["name"]: newest_rows(layout.sense_db(name), t["name"], rows)
                     for t in tables if not t["engine"]} if rows > 0 else {},
        problem=load_problem(home, name) if check_code else None,
    )


def load_problem(home: Path, name: str) -> dict[str, Any] | None:
    """What would stop the sense from loading (drift included), found by importing it in a child process."""
    if not (Layout(home).sense_dir(name) / "sense.py").is_file():
        return None
    found = check_code(home, [name], [])
    return {"file": found[0].file, "line": found[0].line, "message": found[0].message} if found else None


def code_stamp(home: Path, name: str) -> tuple[tuple[str, int, int], ...]:
    """Every file of the sense's folder (caches left out) with its mtime and size: what `load_problem`
    depends on, so a caller can keep its answer until one of them changes."""
    folder = Layout(home).sense_dir(name)
    if not folder.is_dir():
        return ()
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return tuple(sorted((p.relative_to(folder).as_posix(), p.stat().st_mtime_ns, p.stat().st_size) for p in files))


def newest_rows(path: Path, table: str, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows of one of the sense's own tables, newest first (by its time= column, else rowid)."""
    quoted = '"' + table.replace('"', '""') + '"'
    time_col = read_rows(path, "SELECT time_column FROM _nerve_archive WHERE table_name = ?", (table,))
    orders = ([f'"{time_col[0][0]}" DESC'] if time_col else []) + ["rowid DESC", ""]
    for order in orders:
        sql = f"SELECT * FROM {quoted}" + (f" ORDER BY {order}" if order else "") + " LIMIT ?"
        try:
            return _read_dicts(path, sql, (limit,))
        except SenseError:
            continue  # e.g. a WITHOUT ROWID table has no rowid to order by
    return []


def _read_dicts(path: Path, sql: str, params: tuple) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        conn = open_reader(path)
    except sqlite3.Error as exc:  # damaged, or unreadable
        raise SenseError(f"cannot read {path}: {exc}") from exc
    try:
        cursor = conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    except sqlite3.Error as exc:
        raise SenseError(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()


def blocked_state(home: Path, name: str) -> dict[str, Any] | None:
    """Why and until when the sense is not computed: the running engine knows penalties too; on disk, quarantines."""
    try:
        state = request(home, "status", timeout=2.0)["senses"].get(name) or {}
    except NerveError:
        entry = load_quarantines(Layout(home).logs_db).get(name)
        return {"state": "quarantined", **entry} if entry else None
    if not state.get("blocked_until"):
        return None
    return {"state": state["state"], "until": state["blocked_until"], "why": state["blocked_why"]}


def recent_signals(home: Path, name: str, limit: int) -> list[dict[str, Any]]:
    """The last `limit` signals, oldest first; archived days too when the history module is there."""
    if limit <= 0:
        return []
    return [{"id": s["id"], "ts": s["ts"], "payload": s["payload"]} for s in sense_history(home, name, None, limit)]


def sparkline(values: list[Any]) -> str | None:
    """▁▂▃▄▅▆▇█ over the values when every one is a number (bools are not), else None."""
    if len(values) < 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    low, high = min(values), max(values)
    if high == low:
        return SPARKS[len(SPARKS) // 2 - 1] * len(values)
    scale = (len(SPARKS) - 1) / (high - low)
    return "".join(SPARKS[round((v - low) * scale)] for v in values)


# --- reading sense databases ---------------------------------------------------


def _summary(layout: Layout, config: NerveConfig, name: str, archived: dict[str, int] | None = None) -> SenseSummary:
    """Signals counted in the database *and* its archive files, so `sense list` and `sense show` agree."""
    settings = settings_of(config, name)
    stats = read_rows(layout.sense_db(name), "SELECT count(*), max(ts) FROM _signals")
    count, last = stats[0] if stats else (0, None)
    newest = read_rows(layout.sense_db(name), "SELECT payload FROM _signals ORDER BY id DESC LIMIT 1") if count else None
    if archived is None:
        archived = archived_counts(layout.home, name)
    count += archived.get("_signals", 0)
    if last is None and archived.get("_signals"):
        last = last_archived_signal(layout.home, name)
    payload = orjson.loads(newest[0][0]) if newest else None
    return SenseSummary(name, settings.group, settings.enabled, triggers_of(config, name), last, count, payload)


def _tables(path: Path, archived: dict[str, int]) -> list[dict[str, Any]]:
    """Each table's rows in the database file, and how many more are in the archive files."""
    names = read_rows(path, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                            "ORDER BY name LIKE '\\_%' ESCAPE '\\', name")
    time_columns = dict(read_rows(path, "SELECT table_name, time_column FROM _nerve_archive") or [])
    out = []
    for (table,) in names or []:
        quoted = '"' + table.replace('"', '""') + '"'
        rows = read_rows(path, f"SELECT count(*) FROM {quoted}")
        out.append({"name": table, "rows": rows[0][0] if rows else None, "archived_rows": archived.get(table, 0),
                    "engine": table.startswith("_"), "time_column": time_columns.get(table)})
    return out
