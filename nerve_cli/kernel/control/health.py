"""The built-in `nerve-health` sense: the engine watching itself.

It is engine code, so the kernel computes it in-process; otherwise it is a
sense like any other: scheduled by the same rules, its signals stored in
`data/senses/nerve-health.db` (`_signals`) and routed to reflexes that list it.
The payload is built on the event loop (figures the kernel holds); the row is
written by `HealthStore.record` off it, in a thread, because SQLite may wait
5 s for a lock there, or fail (disk full, a damaged file): a slow or failed
write is a slow or failed health compute, never a stalled kernel.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import psutil

from nerve_cli.clock import now_ms
from nerve_cli.schema import views
from nerve_cli.schema.apply import IDENTITY_SQL
from nerve_cli.store.sqlitefile import damaged, is_damage, open_writer

if TYPE_CHECKING:
    from nerve_cli.kernel.control.snapshot import Snapshot
    from nerve_cli.kernel.core.freshness import Freshness

HEALTH_SENSE = "nerve-health"


class BuiltinSenseDb:
    """The database of a sense the kernel computes itself (`_signals` and its view): checked whole when the
    engine starts (it is small), so a damaged page is reported with the fix, never met at a signal."""

    def __init__(self, path: Path, sense: str) -> None:
        self.path = path
        self.fix = f"delete it (`rm {path}`): the engine starts a new one (it holds only {sense}'s own signals)"
        self.conn = open_writer(path, fix=self.fix)
        try:
            self._check()
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " ts INTEGER NOT NULL, payload TEXT NOT NULL)"
            )
            self.conn.execute("CREATE INDEX IF NOT EXISTS idx__signals_ts ON _signals(ts)")
            for statement in IDENTITY_SQL:  # its listeners' cursors remember which database they counted in
                self.conn.execute(statement)
            views.sync(self.conn, views.sense_views(self.conn))  # signals_view, like every sense database
            self.prepare()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            if is_damage(exc):
                raise damaged(path, str(exc), self.fix) from None
            raise
        except BaseException:
            self.conn.close()
            raise

    def prepare(self) -> None:
        """More of its own tables (in the opening's error handling)."""

    def _check(self) -> None:
        problem = self.conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise damaged(self.path, " ".join(problem.replace("*** in database main ***", "").split()), self.fix)

    def close(self) -> None:
        self.conn.close()


class HealthStore(BuiltinSenseDb):
    """nerve-health.db: one row per compute."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, HEALTH_SENSE)

    def record(self, payload: dict[str, Any]) -> int:
        """Insert one signal row (runs in a thread: SQLite may wait for a lock here); its `_signals` id."""
        ts = now_ms()
        try:
            cur = self.conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (ts, orjson.dumps(payload).decode()))
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise damaged(self.path, str(exc), self.fix) from None
            raise
        return cur.lastrowid or 0


def rss_bytes(pids: list[int]) -> dict[int, int]:
    """Resident memory of each live pid (psutil); a pid whose figure cannot be read is left out.

    That includes /proc being unreadable for want of a file descriptor (EMFILE):
    a figure missing from one signal, never a failed health compute.
    """
    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).memory_info().rss
        except (psutil.Error, OSError):
            pass
    return out


def health_payload(snapshot: "Snapshot", freshness: "Freshness | None" = None) -> dict[str, Any]:
    """What the engine knows about itself, as the health sense's signal."""
    pids = [os.getpid()] + [w.pid for w in snapshot.workers.values() if w.pid]
    rss = rss_bytes(pids)
    hour_ago = (time.time() - 3600) * 1000
    states = {name: view.state for name, view in snapshot.senses.items()}
    recent_errors = snapshot.recent_errors
    return {
        "uptime_s": round(time.time() - snapshot.started_at, 1),
        "senses": len(states),
        "running": sum(1 for s in states.values() if s.running),
        "pending": snapshot.pending,
        "errors_last_hour": sum(1 for e in recent_errors if e["ts"] >= hour_ago),
        "warnings": len(snapshot.warnings),  # nerve.yaml's: not errors, counted apart
        "recent_errors": recent_errors[-10:],
        "workers": {g: w.state for g, w in snapshot.workers.items()},
        "kernel_rss_mb": round(rss.get(os.getpid(), 0) / 2**20, 1),
        "workers_rss_mb": round(sum(v for k, v in rss.items() if k != os.getpid()) / 2**20, 1),
        "backpressure": {n: {"coalesced": s.coalesced, "deferred": s.deferred, "debounced": s.debounced,
                             "skipped": s.skipped}
                         for n, s in states.items()
                         if s.coalesced or s.deferred or s.debounced or s.skipped},
        "blocked": {n: {"until": s.blocked_until, "why": s.blocked_why, "quarantined": s.quarantined}
                    for n, s in states.items() if s.blocked_until},
        **_freshness(freshness),
    }


def _freshness(freshness: "Freshness | None") -> dict[str, Any]:
    """Senses stale now (no signal within their expect_signal_every), and who went stale or recovered since the
    last health signal (the engine computes nerve-health at once on each such change)."""
    if freshness is None:
        return {}
    changes = freshness.take_changes()
    return {
        "stale": {n: {"since_ms": int(since * 1000), "expected_every_s": freshness.expected.get(n),
                      "last_signal_ms": int(freshness.last[n] * 1000) if n in freshness.last else None}
                  for n, since in sorted(freshness.stale.items())},
        "went_stale": changes.went_stale, "recovered": changes.recovered,
    }
