"""The instance as its files tell it, when no engine runs: what `nerve status` and `nerve top` show then.

Shaped like the engine's `status` answer (`contract.engine.status` turns either
into the `status` document), with `running: false`: no workers, nothing due or
pending, and each sense `stopped` (enabled), `disabled` or `quarantined` (a
quarantine is kept in logs.db and outlives the engine) beside when it last ran
and how many errors the log holds for it. Threads come from the log as well:
the ones waiting for a person or queued for the next start.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from nerve_cli.config.agents import agent_sources
from nerve_cli.config.load import load_config_and_warnings
from nerve_cli.config.model import HEALTH_SENSE, NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.core.listeners import listeners_of
from nerve_cli.store.events import backlog
from nerve_cli.store.inbox import agent_backlog
from nerve_cli.store.inbox import backlog as inbox_backlog
from nerve_cli.store.logs import last_completions, open_readonly
from nerve_cli.store.quarantines import load_quarantines
from nerve_cli.store.sense_pauses import load_pauses
from nerve_cli.store.sqlitefile import DamagedDatabase, header_problem
from nerve_cli.vocab.logrows import LogKind
from nerve_cli.vocab.states import SenseStatus, ThreadStatus


def stopped_answer(home: Path, config: NerveConfig | None = None) -> dict[str, Any]:
    """The `status` answer of a stopped engine, read from nerve.yaml (or `config`, already read) and logs.db."""
    layout = Layout(Path(home))
    warnings: list[Any] = []
    if config is None:
        config, warnings = load_config_and_warnings(layout.home)
    facts = _LogFacts(layout.logs_db)
    problems = [facts.problem] if facts.problem else []
    try:
        listeners = stopped_listeners(layout, config)
    except DamagedDatabase as exc:
        listeners, problems = {}, [*problems, str(exc)]
    looked_at = [layout.events_db, *(layout.sense_db(n) for n in sorted({*config.senses, HEALTH_SENSE}))]
    problems += [str(p) for path in looked_at
                 if str(path) not in "".join(problems) and (p := header_problem(path)) is not None]
    return {
        "pid": None, "home": str(layout.home), "running": False, "started_at": None, "uptime_s": None,
        "stopped_at": facts.stopped_at, "workers": [],
        "senses": stopped_senses(config, facts.quarantines, facts.last_runs, facts.errors, facts.paused),
        "channels": sorted({s for r in config.active_reflexes() for s in r.on if s not in config.senses}),
        "warnings": [str(w) for w in warnings] + problems,  # nerve.yaml's, then damaged files it met
        "workflows": {name: {"enabled": w.enabled, "concurrency": w.concurrency, "overflow": w.overflow,
                             "max_queue": w.max_queue, "idempotent": w.idempotent,
                             "worker": {"pid": None, "state": "stopped"}, "running": [],
                             "queued": facts.threads.get((name, ThreadStatus.QUEUED), []),
                             "waiting": facts.threads.get((name, ThreadStatus.WAITING), []),
                             "paused": facts.threads.get((name, ThreadStatus.PAUSED), []),
                             "counts": facts.counts.get(name, {})}
                      for name, w in config.workflows.items()},
        "fleet": None,
        "listeners": listeners,
        "agents": stopped_agents(layout, config),
    }


def stopped_agents(layout: Layout, config: NerveConfig) -> dict[str, dict[str, Any]]:
    """What waits for each agent, from the files (the status answer's `agents`): a damaged inbox names none."""
    out = {}
    for name, agent in config.agents.items():
        try:
            out[name] = agent_backlog(inbox_backlog(layout.data, name, agent_sources(config, name), dict(agent.match)))
        except (DamagedDatabase, sqlite3.Error):
            continue
    return out


def stopped_listeners(layout: Layout, config: NerveConfig) -> dict[str, dict[str, Any]]:
    """What waits for each listener, counted from the files as the engine counts it (the status answer's
    `listeners`): enabled ones, and disabled ones, whose events wait for when they are enabled again."""
    enabled = config.enabled_senses()
    return {name: {"enabled": name in enabled,
                   "sources": [{"source": b.source, "kind": b.kind, "cursor": b.cursor, "events": b.events,
                                "oldest_ts": b.oldest_ts} for b in backlog(layout.data, name, sources)]}
            for name, sources in listeners_of(config, layout.home, set(), set()).items()}


def stopped_senses(config: NerveConfig, quarantines: dict[str, dict], last_runs: dict[str, int],
                   errors: dict[str, dict[str, Any]], paused: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Each sense of nerve.yaml as a stopped engine leaves it (status answer fields; times in epoch seconds)."""
    out = {}
    for name, settings in sorted(config.senses.items()):
        quarantine = quarantines.get(name)
        state = (SenseStatus.DISABLED if not settings.enabled else SenseStatus.PAUSED if name in (paused or ())
                 else SenseStatus.QUARANTINED if quarantine else SenseStatus.STOPPED)
        seen = errors.get(name, {})
        out[name] = {"group": settings.group, "state": state, "running": False, "pending": False, "runs": 0,
                     "errors": seen.get("count", 0), "last_error": seen.get("message"),
                     "last_error_at": seen.get("at"),
                     "last_run": last_runs[name] / 1000 if name in last_runs else None, "next_due": None,
                     "blocked_until": quarantine.get("until") if quarantine else None,
                     "blocked_why": quarantine.get("why") if quarantine else None,
                     "expect_signal_every": settings.expect_signal_every, "stale_since": None}
    return out


class _LogFacts:
    """What a stopped engine's logs.db says (nothing, when there is none yet)."""

    def __init__(self, logs_db: Path) -> None:
        self.quarantines: dict[str, dict] = {}
        self.paused: set[str] = set()  # `nerve sense pause`: kept for the next engine
        self.last_runs: dict[str, int] = {}
        self.errors: dict[str, dict[str, Any]] = {}
        self.threads: dict[tuple[str, str], list[str]] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.stopped_at: float | None = None
        self.problem: str | None = None  # a damaged logs.db, named: the view shows what the other files say
        if not logs_db.exists():
            return
        try:
            self.quarantines = load_quarantines(logs_db)
            self.paused = set(load_pauses(logs_db))
            self.last_runs = last_completions(logs_db)
            conn = open_readonly(logs_db)
            try:
                self._read(conn)
            except sqlite3.OperationalError:  # a log from before these tables: what it has is enough
                pass
            finally:
                conn.close()
        except DamagedDatabase as exc:
            self.problem = str(exc)

    def _read(self, conn: sqlite3.Connection) -> None:
        for ref, count, ts, message in conn.execute(
                "SELECT ref_id, COUNT(*), MAX(ts), (SELECT json_extract(payload, '$.message') FROM logs AS l2 "
                "WHERE l2.source = 'system' AND l2.type = 'error' AND l2.ref_id = logs.ref_id ORDER BY id DESC "
                "LIMIT 1) FROM logs WHERE source = 'system' AND type = 'error' AND ref_id IS NOT NULL "
                "GROUP BY ref_id"):
            self.errors[ref] = {"count": count, "at": ts / 1000, "message": message}
        for run_id, workflow, status in conn.execute("SELECT run_id, workflow, status FROM workflow_runs "
                                                     "ORDER BY ts"):
            self.counts.setdefault(workflow, {})
            self.counts[workflow][status] = self.counts[workflow].get(status, 0) + 1
            if status in (ThreadStatus.QUEUED, ThreadStatus.WAITING, ThreadStatus.PAUSED):
                self.threads.setdefault((workflow, status), []).append(run_id)
        source, type_ = LogKind.ENGINE_STOPPED.value
        row = conn.execute("SELECT MAX(ts) FROM logs WHERE source = ? AND type = ?", (source, type_)).fetchone()
        self.stopped_at = row[0] / 1000 if row and row[0] else None
