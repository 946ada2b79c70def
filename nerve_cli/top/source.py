"""What `nerve top` shows, gathered without Textual: the engine's status over the control socket,
or (engine stopped) the same picture read from the files, plus what happened since the last look.

`Source.snapshot()` is called about twice a second from a thread. New signals
are read from each sense's `_signals` by id and new errors from logs.db by id,
so every call costs a few indexed queries whatever the history's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil

from nerve_cli.config.load import load_config
from nerve_cli.contract.engine import status as status_document
from nerve_cli.contract.threads import thread_list
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.ops.client import request
from nerve_cli.ops.stopped import stopped_answer
from nerve_cli.ops.workflows.threads import list_threads
from nerve_cli.store.sqlitefile import read_rows
from nerve_cli.vocab.states import SenseStatus

EVENTS_AT_START = 20
ACTIVE = ("started", "waiting", "queued")


@dataclass
class Snapshot:
    live: bool                      # False: the engine is stopped and this was read from the files
    engine: dict[str, Any]          # the status document's `engine` (pid, started_ms, uptime_s); {} when stopped
    senses: list[dict[str, Any]]    # name, group, state, last_value, last_run_ms, next_due_ms, errors, blocked,
                                    # backlog (events waiting), backlog_ms (when the oldest was stored)
    workers: list[dict[str, Any]]   # group, pid, state, rss, cpu, restarts
    threads: list[dict[str, Any]]   # the `thread list` document's threads: run_id, workflow, status, rounds, …
    events: list[dict[str, Any]] = field(default_factory=list)  # new since the last snapshot: kind, sense, ts, text
    fleet: dict[str, Any] | None = None  # the status document's `fleet` (this host in its fleet), when it has one
    causal: dict[str, Any] | None = None  # the status document's `causal` (refusals past the causal depth bound)
    agents: list[dict[str, Any]] = field(default_factory=list)  # the status document's `agents`: each one's backlog


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
        answer = self._status()
        live = answer is not None
        # the same `status` document `nerve status --json` prints, read from the files when no engine runs
        doc = status_document(answer if answer is not None else stopped_answer(self.home, config))
        return Snapshot(live, doc["engine"] if live else {}, self._senses_live(doc["senses"], doc["listeners"]),
                        self._workers(doc["workers"]), self._threads(), events, doc.get("fleet"), doc.get("causal"),
                        list(doc.get("agents") or []))

    def _config(self):
        """nerve.yaml, parsed again only when the file changed (twice a second adds up)."""
        stamp = self.layout.config.stat().st_mtime_ns
        if self._config_at != stamp:
            self._config_cache, self._config_at = load_config(self.home), stamp
        return self._config_cache

    def _status(self) -> dict[str, Any] | None:
        if not self.layout.socket.exists():
            return None
        try:
            return request(self.home, "status", timeout=2.0)
        except NerveError:
            return None

    def _senses_live(self, senses: list[dict[str, Any]], listeners: list[dict[str, Any]]) -> list[dict[str, Any]]:
        waiting = {lst["name"]: lst for lst in listeners}
        out = []
        for sense in senses:
            last = self._last_value.get(sense["name"])
            behind = waiting.pop(sense["name"], None)
            stale = sense.get("stale") and sense["state"] in (SenseStatus.IDLE, SenseStatus.PENDING)
            out.append({"name": sense["name"], "group": sense["group"], "state": "stale" if stale else sense["state"],
                        "last_value": last[1] if last else None, "last_run_ms": sense["last_run_ms"],
                        "next_due_ms": sense["next_due_ms"], "errors": sense["errors"],
                        "blocked": sense["blocked_why"] if sense["blocked_until_ms"] else None,
                        **_backlog(behind)})
        for name, behind in sorted(waiting.items()):  # disabled listeners: what waits for them shows too
            last = self._last_value.get(name)
            out.append({"name": name, "group": "-", "state": "disabled", "last_value": last[1] if last else None,
                        "last_run_ms": None, "next_due_ms": None, "errors": 0, "blocked": None, **_backlog(behind)})
        return out

    def _workers(self, workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The status document's workers, with resident memory and CPU% read here (the engine does not say)."""
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
                        "restarts": w["restarts"], "computing": w["computing"]})
        return out

    def _threads(self) -> list[dict[str, Any]]:
        """Active threads first (running, waiting for a person, queued), then the five latest ended,
        as in the `thread list` document."""

        if not self.layout.logs_db.exists():
            return []
        runs = thread_list(list_threads(self.layout.logs_db, limit=30))["threads"]
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
            rows = read_rows(self.layout.sense_db(name), sql, (EVENTS_AT_START if first else after,))
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
        rows = read_rows(self.layout.logs_db, sql, (EVENTS_AT_START if first else self._error_id,))
        if rows:
            self._error_id = rows[-1][0]
        elif first:
            last = read_rows(self.layout.logs_db, "SELECT MAX(id) FROM logs")
            self._error_id = (last[0][0] if last else None) or 0
        return [{"kind": "error", "sense": ref, "ts": ts, "value": (orjson.loads(p) if p else {}).get("message")}
                for _id, ref, ts, p in rows]


def _backlog(listener: dict[str, Any] | None) -> dict[str, Any]:
    if listener is None:
        return {"backlog": None, "backlog_ms": None}
    return {"backlog": listener["backlog"], "backlog_ms": listener["oldest_ms"]}

