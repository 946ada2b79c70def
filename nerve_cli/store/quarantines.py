"""Quarantines as logs.db keeps them: `meta['quarantine:<sense>']` = {"until": epoch s, "why"}, or null once lifted.

The engine's guards write them (and lift them) as they decide; `nerve top`, `nerve sense show` and
`nerve sense reset` with the engine stopped read or clear them here, without the engine's parts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from nerve_cli.store.logs import LogStore, read_meta_with_prefix
from nerve_cli.vocab import logrows

QUARANTINE = "quarantine:"


def load_quarantines(logs_db: Path, now: float | None = None) -> dict[str, dict]:
    """sense → {"until": epoch s, "why": str} for quarantines not yet expired."""
    now = time.time() if now is None else now
    found = {}
    for sense, value in read_meta_with_prefix(logs_db, QUARANTINE).items():  # damaged: DamagedDatabase naming it
        entry = json.loads(value)
        if entry and entry.get("until", 0) > now:
            found[sense] = entry
    return found


def keep(logs: LogStore, sense: str, until: float, why: str) -> None:
    """Persist a quarantine with the next flush: it outlives the engine."""
    logs.set_meta(QUARANTINE + sense, json.dumps({"until": until, "why": why}))


def lift(logs: LogStore, sense: str) -> None:
    logs.set_meta(QUARANTINE + sense, "null")


def reset_offline(logs_db: Path, sense: str) -> bool:
    """`nerve sense reset` with no engine running: clear the persisted quarantine (and log the reset)."""
    had = sense in load_quarantines(logs_db)
    store = LogStore(logs_db)
    try:
        lift(store, sense)
        store.write(logrows.reset(sense, had))
    finally:
        store.close()
    return had
