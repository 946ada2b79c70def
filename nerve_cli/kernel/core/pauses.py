"""Paused senses: `nerve sense pause|resume NAME|--group G`, held in the scheduler and kept in logs.db.

A paused sense starts no compute (one already running finishes); its triggers stay pending and its
events wait in their stores, its cursors where they were, so at the resume it computes once and reads
them all. Unlike `enabled: false` nothing cascades: its listeners, peers and reflexes are untouched (a
listener simply hears nothing new from it meanwhile). The pause survives restarts
(`store.sense_pauses`); each pause and resume is a log row.
"""

from __future__ import annotations

from typing import Any

from nerve_cli.clock import now_ms
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.store import sense_pauses
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows


class SensePauses:
    def __init__(self, scheduler: Scheduler, logs: LogStore, log: Log, report: Report) -> None:
        self.scheduler = scheduler
        self.logs = logs
        self.log = log
        self.report = report
        self.since: dict[str, int] = {}  # sense → paused since (unix ms)

    def restore(self) -> None:
        """At start: the senses paused when the last engine stopped (or offline) stay paused."""
        found = sense_pauses.load_pauses(self.logs.path)
        for sense, entry in found.items():
            self.since[sense] = int(entry.get("since_ms") or now_ms())
            self.report("warn", f"{sense} is paused (by {entry.get('by')}): `nerve sense resume {sense}` computes it")
        self.scheduler.pause(found, True)

    def set(self, senses: list[str], paused: bool, by: str, via: str | None) -> list[dict[str, Any]]:
        """Pause (or resume) each sense: [{"sense", "status": paused|resumed|unchanged}]."""
        out = []
        for sense in senses:
            if (sense in self.since) == paused:
                out.append({"sense": sense, "status": "unchanged", "paused": paused})
                continue
            if paused:
                self.since[sense] = now_ms()
                sense_pauses.keep(self.logs, sense, {"by": by, "via": via, "since_ms": self.since[sense]})
                self.log(logrows.sense_paused(sense, by, via))
            else:
                since = self.since.pop(sense)
                sense_pauses.lift(self.logs, sense)
                self.log(logrows.sense_resumed(sense, by, via, now_ms() - since))
            out.append({"sense": sense, "status": "paused" if paused else "resumed", "paused": paused})
        self.scheduler.pause(senses, paused)
        return out
