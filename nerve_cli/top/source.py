"""What `nerve top` shows, gathered without Textual: the engine's status over the control socket,
or (engine stopped) the same picture read from the files, plus what happened since the last look.

`Source.snapshot()` is called about twice a second from a thread. New signals
are read from each sense's `_signals` by id and new errors from logs.db by id,
so every call costs a few indexed queries whatever the history's size.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout

EVENTS_AT_START = 20
ACTIVE = ("started", "waiting", "queued")


@dataclass
class Snapshot:
    live: bool                      # False: the engine is stopped and this was read from the files
    engine: dict[str, Any]          # pid, uptime_s (live only)
    senses: list[dict[str, Any]]    # name, state, last_value, last_ts, next_due, errors, blocked
    workers: list[dict[str, Any]]   # group, pid, state, rss, cpu, restarts
    threads: list[dict[str, Any]]   # run_id, workflow, status, rounds, time
    events: list[dict[str, Any]] = field(default_factory=list)  # new since the last snapshot: kind, sense, ts, text


class Source:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.layout = Layout(self.home)
        self._signal_ids: dict[str, int] = {}     # sense → last _signals id seen
        self._last_value: dict[str, tuple[int, Any]] = {}
        self._error_id: int | None = None
        self._procs: dict[int, Any] = {}           # pid → psutil.Process (cpu_percent needs the same object)
        self._config_at: int | None = None
        self._config_cache: Any = None

    # -- the picture -----------------------------------------------------------
    def snapshot(self) -> Snapshot:
        config = self._config()
        names = [*config.senses, "nerve-health"]
        events = self._new_signals(names) + self._new_errors()
        events.sort(key=lambda e: e["ts"])
        status = self._status()
        if status is None:
            return Snapshot(False, {}, self._senses_from_files(config), [], self._threads(), events)
        return Snapshot(True, {"pid": status["pid"], "uptime_s": status["uptime_s"]},
                        self._senses_live(status), self._workers(status["workers"]), self._threads(), events)

    def _config(self):
        """nerve.yaml, parsed again only when the file changed (twice a second adds up)."""
        from nerve_cli.config.load import load_config

        stamp = self.layout.config.stat().st_mtime_ns
        if self._config_at != stamp:
            self._config_cache, self._config_at = load_config(self.home), stamp
        return self._config_cache

    def _status(self) -> dict[str, Any] | None:
        from nerve_cli.kernel.client import request

        if not self.layout.socket.exists():
            return None
        try:
            return request(self.home, "status", timeout=2.0)
        except NerveError:
            return None

    def _senses_live(self, status: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for name, s in sorted(status["senses"].items()):
            last = self._last_value.get(name)
            out.append({"name": name, "group": s["group"], "state": s["state"], "last_value": last[1] if last else None,
                        "last_ts": last[0] if last else None,
                        "last_run": s["last_run"], "next_due": s["next_due"], "errors": s["errors"],
                        "blocked": s["blocked_why"] if s["blocked_until"] else None})
        return out

    def _senses_from_files(self, config) -> list[dict[str, Any]]:
        from nerve_cli.kernel.guards import load_quarantines

        quarantined = load_quarantines(self.layout.logs_db) if self.layout.logs_db.exists() else {}
        errors = self._error_counts()
        out = []
        for name, settings in sorted(config.senses.items()):
            last = self._last_value.get(name)
            state = "quarantined" if name in quarantined else ("idle" if settings.enabled else "disabled")
            out.append({"name": name, "group": settings.group, "state": state,
                        "last_value": last[1] if last else None, "last_ts": last[0] if last else None,
                        "last_run": last[0] / 1000 if last else None, "next_due": None,
                        "errors": errors.get(name, 0),
                        "blocked": quarantined[name].get("why") if name in quarantined else None})
        return out

    def _workers(self, workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        import psutil

        out = []
        for w in workers:
            rss = cpu = None
            pid = w.get("pid")
            if pid:
                try:
                    proc = self._procs.get(pid) or self._procs.setdefault(pid, psutil.Process(pid))
                    rss, cpu = proc.memory_info().rss, proc.cpu_percent(None)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    self._procs.pop(pid, None)
            out.append({"group": w["group"], "pid": pid, "state": w["state"], "rss": rss, "cpu": cpu,
                        "restarts": w["restarts"], "computing": w.get("computing", [])})
        return out

    def _threads(self) -> list[dict[str, Any]]:
        from nerve_cli.workflows.threads import list_threads

        if not self.layout.logs_db.exists():
            return []
        runs = list_threads(self.layout.logs_db, limit=30)
        active = [r for r in runs if r["status"] in ACTIVE]
        ended = [r for r in runs if r["status"] not in ACTIVE][:5]
        return active + ended

    # -- what happened since the last look ----------------------------------------
    def _new_signals(self, names: list[str]) -> list[dict[str, Any]]:
        events = []
        for name in names:
            first = name not in self._signal_ids
            after = self._signal_ids.get(name, 0)
            sql = ("SELECT id, ts, payload FROM (SELECT id, ts, payload FROM _signals ORDER BY id DESC LIMIT ?) "
                   "ORDER BY id" if first else "SELECT id, ts, payload FROM _signals WHERE id > ? ORDER BY id")
            rows = _read(self.layout.sense_db(name), sql, (EVENTS_AT_START if first else after,))
            self._signal_ids[name] = rows[-1][0] if rows else after
            for _id, ts, payload in rows:
                value = orjson.loads(payload) if payload else None
                self._last_value[name] = (ts, value)
                events.append({"kind": "signal", "sense": name, "ts": ts, "value": value})
        return events

    def _new_errors(self) -> list[dict[str, Any]]:
        first = self._error_id is None
        sql = ("SELECT id, ref_id, ts, payload FROM (SELECT id, ref_id, ts, payload FROM logs WHERE source = 'system' "
               "AND type = 'error' ORDER BY id DESC LIMIT ?) ORDER BY id" if first else
               "SELECT id, ref_id, ts, payload FROM logs WHERE source = 'system' AND type = 'error' AND id > ? "
               "ORDER BY id")
        rows = _read(self.layout.logs_db, sql, (EVENTS_AT_START if first else self._error_id,))
        if rows:
            self._error_id = rows[-1][0]
        elif first:
            last = _read(self.layout.logs_db, "SELECT MAX(id) FROM logs")
            self._error_id = (last[0][0] if last else None) or 0
        return [{"kind": "error", "sense": ref, "ts": ts, "value": (orjson.loads(p) if p else {}).get("message")}
                for _id, ref, ts, p in rows]

    def _error_counts(self) -> dict[str, int]:
        rows = _read(self.layout.logs_db, "SELECT ref_id, COUNT(*) FROM logs WHERE source = 'system' "
                                          "AND type = 'error' GROUP BY ref_id")
        return dict(rows)


def _read(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows on a read-only connection; [] when the database or table is not there yet."""
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def ago(ts_s: float | None, now: float | None = None) -> str:
    if ts_s is None:
        return "never"
    seconds = max(0, int((now or time.time()) - ts_s))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def due_in(ts_s: float | None, now: float | None = None) -> str:
    if ts_s is None:
        return "-"
    seconds = int(ts_s - (now or time.time()))
    return "now" if seconds <= 0 else f"in {seconds}s" if seconds < 120 else f"in {seconds // 60}m"
