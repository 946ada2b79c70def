"""Watch the instance folder and say what changed, in the engine's terms.

watchfiles reports raw file events (a vim-style save is `added` + `deleted`
for one path, a tmp-file + rename is `added`); we only need to know *which*
sense, workflow or config changed, so events are reduced to a `Changes` set
and one save becomes one reload. `data/`, `.git/`, caches and editor temp
files are ignored.

The folders are chosen here, not crawled by the watcher: a recursive watch
follows every symlink, and `senses/x -> /proc/self` walked /proc until a
PermissionError ended file watching for good. So the instance folder, senses/
(with each sense's folders) and workflows/ are watched one by one, never
through a symlink that leads out of the instance; when a folder appears or goes,
the set is rebuilt and the watch starts again.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from watchfiles import DefaultFilter, awatch

IGNORED_DIRS = {"data", ".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", "node_modules"}
DEBOUNCE_MS = 300  # the longest a burst of saves is collected before one reload
MAX_DEPTH = 6  # folders below senses/ that are watched (a sense's own packages, migrations/)
STEP_MS = 50  # watchfiles' poll of its event queue: 20 wake-ups/s idle; a batch ends after this much quiet
ACTIVE_MS = 2000  # with no event, a watch yields once in this long (the first yield: the watch is running)


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
            parts = Path(raw).relative_to(home).parts
        except ValueError:
            try:
                parts = Path(os.path.realpath(raw)).relative_to(os.path.realpath(home)).parts
            except ValueError:
                continue
        if not parts or parts[0] in IGNORED_DIRS:
            continue
        if parts == ("nerve.yaml",):
            changes.config = True
        elif parts[0] == "senses" and len(parts) >= 3 and _is_sense_file(parts[2:]):
            changes.senses.add(parts[1])
        elif parts[0] == "workflows" and len(parts) == 2 and _definition(parts[1]):
            changes.workflows.add(_definition(parts[1]))
    return changes


def _definition(file: str) -> str:
    """The workflow a file of workflows/ defines (NAME.py, or a pipeline NAME.pipeline.yaml|yml|json), else ''."""
    for suffix in (".pipeline.yaml", ".pipeline.yml", ".pipeline.json", ".py"):
        if file.endswith(suffix):
            return file[: -len(suffix)]
    return ""


def _is_sense_file(rest: tuple[str, ...]) -> bool:
    if rest[-1].endswith(".py"):
        return len(rest) == 1 or rest[0] != "migrations"
    return len(rest) == 2 and rest[0] == "migrations" and rest[1].endswith(".sql")


class _Filter(DefaultFilter):
    def __init__(self) -> None:
        super().__init__(ignore_dirs=tuple(set(DefaultFilter.ignore_dirs) | IGNORED_DIRS))

    def __call__(self, change, path: str) -> bool:
        name = Path(path).name
        if name.endswith(("~", ".swp", ".swx", ".tmp")) or name.startswith((".#", "#")):
            return False
        return super().__call__(change, path)


def watched_dirs(home: Path) -> set[Path]:
    """The folders whose files the engine reloads, reached without leaving the instance."""
    root = Path(os.path.realpath(home))
    found = {home}
    seen: set[Path] = set()

    def visit(folder: Path, depth: int) -> None:
        real = Path(os.path.realpath(folder))
        if real in seen or not real.is_relative_to(root) or depth > MAX_DEPTH:
            return  # a loop, or a symlink out of the instance
        seen.add(real)
        found.add(folder)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if depth < MAX_DEPTH and entry.name not in IGNORED_DIRS and not entry.name.startswith("."):
                try:
                    if entry.is_dir():
                        visit(Path(entry.path), depth + 1)
                except OSError:
                    continue

    for top, depth in (("senses", 0), ("workflows", MAX_DEPTH)):  # workflows/*.py only: no deeper
        if (home / top).is_dir():
            visit(home / top, depth)
    return found


async def watch(home: Path, on_change: Callable[[Changes], Awaitable[None]], stop: asyncio.Event) -> None:
    """Call `on_change` once per debounced batch of relevant file changes, until `stop` is set.

    When a folder comes or goes the watch starts again over the new set; a file saved between the old
    watch's end and the new one's start would be seen by neither (`nerve sense new` makes a folder, then
    writes nerve.yaml: 2 of 14 new senses were never loaded). So what may have changed in that gap —
    nerve.yaml, and the files of the new folders — is looked at once the new watch runs (its first yield:
    an event, or a `rust_timeout` with none), when any later save is the new watch's.
    """
    folders = watched_dirs(home)
    again = Changes()  # to look at once the next watch runs
    while not stop.is_set():
        rebuilt: set[Path] | None = None
        async for batch in awatch(*sorted(folders), watch_filter=_Filter(), stop_event=stop, debounce=DEBOUNCE_MS,
                                  step=STEP_MS, recursive=False, raise_interrupt=False, rust_timeout=ACTIVE_MS,
                                  yield_on_timeout=True):
            changes, again = _merge(classify(home, {path for _change, path in batch}), again), Changes()
            now = watched_dirs(home) if batch else folders
            if now != folders:  # a folder came or went: the watch starts again over the new set
                again = Changes(config=True)
                for folder in now - folders:  # files saved in a new folder before (or while) it is watched
                    again = _merge(again, classify(home, {str(folder / "sense.py"), *_files(folder)}))
                rebuilt = now
            if changes:
                await on_change(changes)
            if rebuilt is not None:
                break
        if rebuilt is None:
            return  # stopped
        folders = rebuilt


def _files(folder: Path) -> set[str]:
    try:
        return {entry.path for entry in os.scandir(folder) if entry.is_file()}
    except OSError:
        return set()


def _merge(a: Changes, b: Changes) -> Changes:
    return Changes(a.config or b.config, a.senses | b.senses, a.workflows | b.workflows)
