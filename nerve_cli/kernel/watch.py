"""Watch the instance folder and say what changed, in the engine's terms.

watchfiles reports raw file events (a vim-style save is `added` + `deleted`
for one path, a tmp-file + rename is `added`); we only need to know *which*
sense, workflow or config changed, so events are reduced to a `Changes` set
and one save becomes one reload. `data/`, `.git/`, caches and editor temp
files are ignored.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from watchfiles import DefaultFilter, awatch

IGNORED_DIRS = {"data", ".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", "node_modules"}
DEBOUNCE_MS = 300  # the longest a burst of saves is collected before one reload
STEP_MS = 100  # watchfiles' poll of its event queue: 10 wake-ups/s idle; a batch ends after this much quiet


@dataclass
class Changes:
    config: bool = False
    senses: set[str] = field(default_factory=set)
    workflows: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return self.config or bool(self.senses) or bool(self.workflows)


def classify(home: Path, paths: set[str]) -> Changes:
    """Which config, senses and workflows a set of changed paths touches."""
    changes = Changes()
    for raw in paths:
        try:
            parts = Path(raw).resolve().relative_to(home.resolve()).parts
        except ValueError:
            continue
        if not parts or parts[0] in IGNORED_DIRS:
            continue
        if parts == ("nerve.yaml",):
            changes.config = True
        elif parts[0] == "senses" and len(parts) >= 3 and _is_sense_file(parts[2:]):
            changes.senses.add(parts[1])
        elif parts[0] == "workflows" and len(parts) == 2 and parts[1].endswith(".py"):
            changes.workflows.add(parts[1][:-3])
    return changes


def _is_sense_file(rest: tuple[str, ...]) -> bool:
    if rest[-1].endswith(".py"):
        return len(rest) == 1 or rest[0] != "migrations"
    return len(rest) == 2 and rest[0] == "migrations" and rest[1].endswith(".sql")


class _Filter(DefaultFilter):
    def __init__(self) -> None:
        super().__init__(ignore_dirs=tuple(set(DefaultFilter.ignore_dirs) | IGNORED_DIRS))

    def __call__(self, change, path: str) -> bool:  # type: ignore[override]
        name = Path(path).name
        if name.endswith(("~", ".swp", ".swx", ".tmp")) or name.startswith((".#", "#")):
            return False
        return super().__call__(change, path)


async def watch(home: Path, on_change: Callable[[Changes], Awaitable[None]], stop: asyncio.Event) -> None:
    """Call `on_change` once per debounced batch of relevant file changes, until `stop` is set."""
    async for batch in awatch(home, watch_filter=_Filter(), stop_event=stop, debounce=DEBOUNCE_MS,
                              step=STEP_MS, recursive=True, raise_interrupt=False):
        changes = classify(home, {path for _change, path in batch})
        if changes:
            await on_change(changes)
