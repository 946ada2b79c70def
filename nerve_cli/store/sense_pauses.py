"""Paused senses as logs.db keeps them: `meta['paused:<sense>']` = {"by", "via", "since_ms"}, or null once resumed.

`nerve sense pause` writes them (through the engine, which holds them in its scheduler, or offline for the
next engine); a paused sense is not computed and its events wait, across restarts, until `nerve sense resume`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.config.model import BUILTIN_SENSES, SenseConfig
from nerve_cli.errors import SenseError
from nerve_cli.store.logs import LogStore, read_meta_with_prefix

PAUSED = "paused:"


def load_pauses(logs_db: Path) -> dict[str, dict[str, Any]]:
    """sense → {"by", "via", "since_ms"} for each paused sense."""
    found = {}
    for sense, value in read_meta_with_prefix(logs_db, PAUSED).items():
        entry = orjson.loads(value)
        if isinstance(entry, dict):
            found[sense] = entry
    return found


def keep(logs: LogStore, sense: str, entry: dict[str, Any]) -> None:
    """Persist a pause with the next flush: it outlives the engine."""
    logs.set_meta(PAUSED + sense, orjson.dumps(entry).decode())


def lift(logs: LogStore, sense: str) -> None:
    logs.set_meta(PAUSED + sense, "null")


def resolve(senses: Mapping[str, SenseConfig], names: list[str], group: str | None) -> list[str]:
    """The senses named, or every sense of `group`; SenseError naming what is not there."""
    if group is not None:
        found = [n for n, s in senses.items() if s.group == group]
        if not found:
            groups = sorted({s.group for s in senses.values()})
            raise SenseError(f"no sense in group {group!r} (groups: {', '.join(groups) or 'none'})")
        return found
    for name in names:
        if name in BUILTIN_SENSES:
            raise SenseError(f"{name} is built in: it cannot be paused")
        if name not in senses:
            raise SenseError(f"no sense {name!r} in nerve.yaml (see `nerve sense list`)")
    return list(names)
