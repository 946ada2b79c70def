"""Signals and prints as log-shaped rows, for `nerve logs --signals / --prints`.

A signal's payload lives in its sense's own database (`_signals`, then the
archive), not in logs.db; `--signals` reads it from there and shows it as a row
`{source: signal, type: signal, ref_id: SENSE, payload: VALUE}` in time order
with the log's rows, so the log is not made to hold every payload twice. What a
compute printed is in logs.db already (`reflex/output` rows).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Iterable, Iterator

from nerve_cli.home import Layout
from nerve_cli.store.history import sense_history
from nerve_cli.store.logs import iso_ms, open_readonly, parse_payload, query_logs

PRINTS = "output"  # the log type of a compute's printed lines


def senses_with_signals(home: Path) -> list[str]:
    """Every sense that has a database (the built-in health sense included)."""
    folder = Layout(Path(home)).sense_data
    return sorted(p.name[:-3] for p in folder.glob("*.db")) if folder.is_dir() else []


def signal_rows(home: Path, senses: Iterable[str], since_ms: int | None = None,
                limit: int | None = None, *, until_ms: int | None = None) -> list[dict]:
    """The newest `limit` signals of `senses` (archived days too when reached), as log-shaped rows, oldest first."""
    rows = [_row(name, s["id"], s["ts"], s["payload"])
            for name in senses for s in sense_history(home, name, since_ms, None if until_ms else limit)
            if until_ms is None or s["ts"] <= until_ms]
    rows.sort(key=lambda r: (r["ts"], r["ref_id"], r["signal_id"]))
    return rows[-limit:] if limit else rows


def merge(*parts: list[dict], limit: int | None = None) -> list[dict]:
    """Rows of several kinds in time order (the log's own order within a millisecond), newest `limit` last."""
    rows = sorted((r for part in parts for r in part), key=lambda r: r["ts"])
    return rows[-limit:] if limit else rows


def follow(home: Path, *, log_filters: dict | None, senses: list[str] | None, after_log_id: int,
           interval: float = 0.2) -> Iterator[list[dict]]:
    """Batches of new log rows (when `log_filters` is given) and new signals (of `senses`), polling forever."""
    layout = Layout(Path(home))
    after = {name: _last_signal_id(layout.sense_db(name)) for name in senses or []}
    while True:
        batch: list[dict] = []
        if log_filters is not None and layout.logs_db.exists():
            rows = query_logs(layout.logs_db, after_id=after_log_id, **log_filters)
            if rows:
                after_log_id = rows[-1]["id"]
                batch += rows
        for name in senses or []:
            new = _signals_after(layout.sense_db(name), after.get(name, 0))
            if new:
                after[name] = new[-1][0]
                batch += [_row(name, i, ts, parse_payload(p)) for i, ts, p in new]
        if batch:
            yield merge(batch)
        else:
            time.sleep(interval)


def _row(sense: str, signal_id: int, ts: int, payload: object) -> dict:
    return {"id": None, "signal_id": signal_id, "ts": ts, "time": iso_ms(ts), "source": "signal", "type": "signal",
            "ref_id": sense, "payload": payload}


def _last_signal_id(path: Path) -> int:
    rows = _query(path, "SELECT max(id) FROM _signals", ())
    return (rows[0][0] or 0) if rows else 0


def _signals_after(path: Path, after: int) -> list[tuple]:
    return _query(path, "SELECT id, ts, payload FROM _signals WHERE id > ? ORDER BY id", (after,))


def _query(path: Path, sql: str, params: tuple) -> list[tuple]:
    if not path.exists():
        return []
    try:
        conn = open_readonly(path)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []  # no _signals yet
    finally:
        conn.close()
