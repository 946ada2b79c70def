"""Guard rails around computes: failure back-off, quarantine that survives restarts, reset.

The bookkeeping is pure (`penalty.PenaltyBook`); this module applies its
verdicts to the scheduler, records them in logs.db (quarantines as
`meta['quarantine:<sense>']` with an absolute expiry) and lifts them.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nerve_cli.kernel.penalty import PenaltyBook

if TYPE_CHECKING:
    from nerve_cli.kernel.engine import Engine

QUARANTINE = "quarantine:"


def load_quarantines(logs_db: Path, now: float | None = None) -> dict[str, dict]:
    """sense → {"until": epoch s, "why": str} for quarantines not yet expired."""
    if not logs_db.exists():
        return {}
    now = time.time() if now is None else now
    conn = sqlite3.connect(logs_db.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT substr(key, ?), value FROM meta WHERE key LIKE ?",
                            (len(QUARANTINE) + 1, QUARANTINE + "%")).fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    found = {}
    for sense, value in rows:
        entry = json.loads(value)
        if entry and entry.get("until", 0) > now:
            found[sense] = entry
    return found


class Guards:
    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.book = PenaltyBook(engine.config.engine)

    def restore(self) -> None:
        for sense, entry in load_quarantines(self.engine.layout.logs_db).items():
            self.engine.scheduler.block(sense, entry["until"], entry["why"], quarantine=True)
            self.engine.report("warn", f"{sense} is quarantined until {_local(entry['until'])}: {entry['why']}")

    def update_config(self) -> None:
        self.book.settings = self.engine.config.engine

    def after_compute(self, sense: str, outcome: str, now: float) -> None:
        verdict = self.book.record(sense, outcome, now)
        if verdict is None:
            return
        engine = self.engine
        engine.scheduler.block(sense, verdict.until, verdict.why, quarantine=verdict.quarantine)
        detail = {"sense": sense, "until": verdict.until, "why": verdict.why}
        if verdict.quarantine:
            engine.logs.set_meta(QUARANTINE + sense, json.dumps({"until": verdict.until, "why": verdict.why}))
            engine.log("system", "quarantined", sense, detail)
            engine.report("error", f"{sense} quarantined until {_local(verdict.until)}: {verdict.why}")
        else:
            engine.log("system", "penalised", sense, detail)
            engine.report("warn", f"{sense} penalised: {verdict.why}")

    def reset(self, sense: str) -> bool:
        """Lift a penalty or quarantine; True if there was one."""
        state = self.engine.scheduler.states.get(sense)
        had = bool(state and state.blocked_until)
        self.book.reset(sense)
        self.engine.scheduler.unblock(sense)
        self.engine.logs.set_meta(QUARANTINE + sense, "null")
        self.engine.log("system", "reset", sense, {"sense": sense, "was_blocked": had})
        return had


def reset_offline(logs_db: Path, sense: str) -> bool:
    """`nerve sense reset` with no engine running: clear the persisted quarantine."""
    from nerve_cli.store.logs import LogStore

    had = sense in load_quarantines(logs_db)
    store = LogStore(logs_db)
    try:
        store.set_meta(QUARANTINE + sense, "null")
        store.append("system", "reset", sense, {"sense": sense, "was_blocked": had})
    finally:
        store.close()
    return had


def _local(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
