"""File reflexes: run a sense when files matching its `paths:` change, and tell it which (the kernel's half).

For every active reflex with `paths:`, the folders its patterns live under
are watched with watchfiles (recursively only where a pattern reaches
deeper than one level). A change to a matching path joins the reflex's
burst; after `debounce` of quiet (never later than `max_wait` after the
burst began; at once without a debounce) the burst is looked at: each path is
stat'ed, compared with the state last recorded for it and, where it differs,
stored as a file event (`store.files`) together with the new state, in one
transaction. Then the sense is triggered, reason `files` with the pattern as
source, and its compute reads the events like any other source's: each
changed path of a burst once, with its change kind.

At start (and for a pattern a reload adds) every pattern is scanned whole
and compared with its recorded state, so files changed while the engine was
stopped arrive now; the first scan of a pattern only records what is there.
The watchers start before that scan, so nothing falls between the two.

The instance's data/ is never looked at (config refuses a pattern reaching
into it; this module drops its paths anyway). Stats, walks and writes run
in one thread of their own, never on the engine's loop.

Links below a pattern's root are not followed, by the scan or by the
watcher: a linked folder is not entered, and a link is not a file (the root
itself may be, or lie under, a link). watchfiles follows links when it adds
its watches, so a path it reports through a linked folder is dropped here;
so a recursively watched root that holds linked folders is watched around
them (found by a walk in the thread before the watchers start), and each is
named once (a warning row). A link made while the engine runs is followed by
the watcher until the next restart or save of nerve.yaml; what it reports
through the link is dropped.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat as stat_mode
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from watchfiles import Change, DefaultFilter, awatch

from nerve_cli.config.model import NerveConfig
from nerve_cli.config.paths import PathPattern, resolve
from nerve_cli.home import Layout
from nerve_cli.store.events import connect
from nerve_cli.store.files import FileChange, Look, Stat, record
from nerve_cli.store.sqlitefile import immediate
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.vocab.reasons import Reason

STEP_MS = 50  # watchfiles ends a batch after this much quiet
BATCH_MS = 1600  # and never holds one longer than this
LOGGED_PATHS = 20  # paths named in a files_changed log row


@dataclass(frozen=True)
class Watch:
    """One reflex with `paths:`: its patterns and its burst rules."""

    reflex: int  # index in nerve.yaml's reflexes
    sense: str
    patterns: tuple[PathPattern, ...]
    debounce: float | None
    max_wait: float | None


def plan(config: NerveConfig, home: Path) -> list[Watch]:
    out = []
    for index, reflex in enumerate(config.reflexes):
        if reflex.paths and reflex in config.active_reflexes():
            out.append(Watch(index, reflex.sense, tuple(resolve(t, home) for t in reflex.paths), reflex.debounce,
                             reflex.max_wait))
    return out


@dataclass
class _Burst:
    first: float
    last: float
    paths: dict[str, set[str]] = field(default_factory=dict)  # pattern text → paths seen
    timer: asyncio.TimerHandle | None = None


class FileReflexes:
    def __init__(self, home: Path, trigger: Callable[[str, Reason], None],
                 log: Callable[[LogRow], None], report: Callable[[str, str], None]) -> None:
        """`trigger(sense, reason)` asks for a compute; `log` appends a log row; `report` tells the console."""
        self.home = Path(home)
        self.layout = Layout(home)
        self.data = self.layout.data
        self.trigger = trigger
        self.log = log
        self.report = report
        self.watches: list[Watch] = []
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="files")
        self._conn: sqlite3.Connection | None = None  # events.db, used only in that thread
        self._bursts: dict[int, _Burst] = {}
        self._watchers: list[asyncio.Task] = []
        self._stop = asyncio.Event()
        self._roots: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._pending: set[asyncio.Future] = set()
        self._warned_links: set[str] = set()
        self._around: frozenset[str] = frozenset()  # folders watched one level deep because links lie below them
        self.closed = False

    # lifecycle --------------------------------------------------------------------------------
    def apply_config(self, config: NerveConfig) -> None:
        """Watch what `config` asks for; patterns new to this engine are scanned whole (first: the watchers)."""
        old = {(w.sense, p.text) for w in self.watches for p in w.patterns}
        self.watches = plan(config, self.home)
        keys = {w.reflex for w in self.watches}
        for key in [k for k in self._bursts if k not in keys]:
            burst = self._bursts.pop(key)
            if burst.timer is not None:
                burst.timer.cancel()
        fresh = [(watch, [p for p in watch.patterns if (watch.sense, p.text) not in old]) for watch in self.watches]
        self._replan([(w, ps) for w, ps in fresh if ps])

    def _replan(self, fresh: list[tuple[Watch, list[PathPattern]]]) -> None:
        """Work out the folders to watch in the thread (a walk, to go around linked folders), then scan `fresh`
        patterns whole: the watchers start on the loop before the thread scans, so nothing falls between."""
        planned = asyncio.get_running_loop().run_in_executor(self._executor, _roots, self.watches, self.data)
        self._pending.add(planned)
        planned.add_done_callback(lambda done: self._planned(done, fresh))

    def _planned(self, done: asyncio.Future, fresh: list[tuple[Watch, list[PathPattern]]]) -> None:
        self._pending.discard(done)
        if self.closed or done.cancelled():
            return
        if done.exception() is not None:
            self.report("error", f"file reflexes: could not work out the folders to watch: {done.exception()}")
            return
        roots, links = done.result()
        self._warn_links(links)
        self._around = frozenset(roots[1]) if links else frozenset()
        self._restart_watchers(roots)
        for watch, patterns in fresh:
            self._submit(watch, self._scan_all, watch.sense, patterns)

    async def close(self) -> None:
        self.closed = True
        self._stop.set()
        for burst in self._bursts.values():
            if burst.timer is not None:
                burst.timer.cancel()
        if self._watchers:
            await asyncio.wait(self._watchers, timeout=2)
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=10)
        self._executor.submit(self._close_conn)
        self._executor.shutdown(wait=True)

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # watching ---------------------------------------------------------------------------------
    def _restart_watchers(self, roots: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        if roots == self._roots and all(not t.done() for t in self._watchers):
            return
        self._stop.set()
        self._stop = asyncio.Event()
        self._roots = roots
        deep, flat = roots
        loop = asyncio.get_running_loop()
        self._watchers = [loop.create_task(self._watch(folders, recursive, self._stop))
                          for folders, recursive in ((deep, True), (flat, False)) if folders]
        missing = sorted({p.root for w in self.watches for p in w.patterns if not os.path.isdir(p.root)})
        for folder in missing:
            self.report("warn", f"file reflexes: {folder} does not exist, so nothing is watched there until it "
                                "does and the engine restarts (or nerve.yaml is saved)")

    async def _watch(self, folders: tuple[str, ...], recursive: bool, stop: asyncio.Event) -> None:
        try:
            async for batch in awatch(*folders, watch_filter=_Filter(self.data), stop_event=stop, step=STEP_MS,
                                      debounce=BATCH_MS, recursive=recursive, raise_interrupt=False,
                                      ignore_permission_denied=True):
                self._seen({path for _change, path in batch})
        except Exception as exc:  # the engine keeps running without these reflexes, and says so
            self.report("error", f"file reflexes stopped watching {', '.join(folders)}: {type(exc).__name__}: "
                                 f"{exc}; save nerve.yaml or restart the engine to watch again")

    def _seen(self, paths: set[str]) -> None:
        now = time.monotonic()
        if self._around and any(os.path.dirname(p) in self._around and os.path.isdir(p) for p in paths):
            self._replan([])  # a folder made beside a link: watched recursively from now on
        for watch in self.watches:
            hits = {p.text: {path for path in paths if (p.matches(path) or _folder_event(p, path))
                             and not _through_link(p.root, path)} for p in watch.patterns}
            hits = {text: found for text, found in hits.items() if found}
            if not hits:
                continue
            burst = self._bursts.get(watch.reflex)
            if burst is None:
                burst = self._bursts[watch.reflex] = _Burst(now, now)
            burst.last = now
            for text, found in hits.items():
                burst.paths.setdefault(text, set()).update(found)
            self._arm(watch, burst)

    def _arm(self, watch: Watch, burst: _Burst) -> None:
        if burst.timer is not None:
            burst.timer.cancel()
        due = burst.last + (watch.debounce or 0.0)
        if watch.max_wait is not None:
            due = min(due, burst.first + watch.max_wait)
        loop = asyncio.get_running_loop()
        burst.timer = loop.call_at(loop.time() + max(0.0, due - time.monotonic()), self._fire, watch.reflex)

    def _fire(self, reflex: int) -> None:
        burst = self._bursts.pop(reflex, None)
        watch = next((w for w in self.watches if w.reflex == reflex), None)
        if burst is None or watch is None or self.closed:
            return
        patterns = {p.text: p for p in watch.patterns}
        looks = [(patterns[text], paths) for text, paths in burst.paths.items() if text in patterns]
        self._submit(watch, self._look_at, watch.sense, looks)

    # the thread: stat, compare, store --------------------------------------------------------
    def _submit(self, watch: Watch, fn: Callable, *args: object) -> None:
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        self._pending.add(future)
        future.add_done_callback(lambda done: self._recorded(watch, done))

    def _recorded(self, watch: Watch, done: asyncio.Future) -> None:
        self._pending.discard(done)
        error = None if done.cancelled() else done.exception()
        if error is not None:
            self.report("error", f"file reflex of {watch.sense}: could not record changes: {error}; "
                                 "they are found again at the next start")
            return
        changes: dict[str, list[FileChange]] = done.result() or {}
        changes = {text: found for text, found in changes.items() if found}
        if not changes:
            return
        shown = [{"pattern": t, "path": c.path, "change": c.change} for t, found in changes.items() for c in found]
        self.log(logrows.files_changed(watch.sense, watch.reflex, shown, LOGGED_PATHS))
        if not self.closed:
            self.trigger(watch.sense, Reason.files(next(iter(changes))))

    def _warn_links(self, links: list[str]) -> None:
        for link in links:
            if link not in self._warned_links:
                self._warned_links.add(link)
                warning = (f"file reflexes: {link} is a link to a folder ({os.path.realpath(link)}); links are not "
                           "followed, so nothing changed through it is reported (name its target in a pattern of "
                           "its own to watch it)")
                self.log(logrows.warning("paths", warning))
                self.report("warn", warning)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.layout.events_db)
        return self._conn

    def _scan_all(self, sense: str, patterns: list[PathPattern]) -> dict[str, list[FileChange]]:
        """Whole scans (start, reload): in one transaction."""
        looks = [(p, Look(scan(p, self.data), whole=True)) for p in patterns]
        return self._store(sense, looks)

    def _look_at(self, sense: str, looks: list[tuple[PathPattern, set[str]]]) -> dict[str, list[FileChange]]:
        return self._store(sense, [(p, _look(p, paths, self.data)) for p, paths in looks])

    def _store(self, sense: str, looks: list[tuple[PathPattern, Look]]) -> dict[str, list[FileChange]]:
        with immediate(self._db()) as conn:
            return {p.text: record(conn, sense, p.text, look) for p, look in looks}


def _roots(watches: Iterable[Watch], data: Path) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], list[str]]:
    """((folders watched recursively, folders watched one level deep), the linked folders found below them).
    Existing folders only, none inside another recursively watched one. A recursive root holding linked
    folders is watched around them (watchfiles would follow each link, a link to / into the whole disk):
    the folders on the way to a link one level deep, their other folders recursively. Runs in the thread."""
    deep = sorted({p.root for w in watches for p in w.patterns if p.recursive and os.path.isdir(p.root)})
    deep = [f for f in deep if not any(f != g and f.startswith(g.rstrip("/") + "/") for g in deep)]
    flat = sorted({p.root for w in watches for p in w.patterns if not p.recursive and os.path.isdir(p.root)}
                  - set(deep))
    flat = [f for f in flat if not any(f.startswith(g.rstrip("/") + "/") for g in deep)]
    around: list[str] = []
    links: list[str] = []
    for root in deep:
        found = _linked_folders(root, str(data))
        if not found:
            around.append(root)
            continue
        links.extend(found)
        on_the_way = {root}
        for link in found:
            folder = os.path.dirname(link)
            while folder not in on_the_way:
                on_the_way.add(folder)
                folder = os.path.dirname(folder)
        flat.extend(sorted(on_the_way))
        for folder in sorted(on_the_way):
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                child = os.path.join(folder, name)
                if child not in on_the_way and child != str(data) and os.path.isdir(child) and not os.path.islink(child):
                    around.append(child)
    return (tuple(around), tuple(sorted(set(flat)))), links


def _linked_folders(root: str, data: str) -> list[str]:
    """The links to folders below `root` (not followed), outside data/."""
    found = []
    for folder, dirs, _files in os.walk(root):
        kept = []
        for name in dirs:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                found.append(path)
            elif path != data:
                kept.append(name)
        dirs[:] = kept
    return found


def _folder_event(pattern: PathPattern, path: str) -> bool:
    """A folder inside the pattern's tree came or went (moved in or out whole: its files were not reported)."""
    return pattern.recursive and pattern.may_contain(path) and (os.path.isdir(path) or not os.path.exists(path))


class _Filter(DefaultFilter):
    """watchfiles' usual noise (.git, caches, editor swap files) and the instance's data/ are never reported."""

    def __init__(self, data: Path) -> None:
        super().__init__()
        self.data = str(data).rstrip("/") + "/"

    def __call__(self, change: Change, path: str) -> bool:
        return not path.startswith(self.data) and super().__call__(change, path)


def _through_link(root: str, path: str) -> bool:
    """Whether `path` lies below `root` through a linked folder (so its real place is elsewhere)."""
    parent = os.path.dirname(path)
    rel = os.path.relpath(parent, root)
    if rel == "." or rel.startswith(".."):
        return False
    return os.path.realpath(parent) != os.path.join(os.path.realpath(root), rel)


def _stat(path: str) -> Stat | None:
    """(mtime_ns, size) of a regular file; None when it is not one (gone, a folder, a link, unreadable)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if stat_mode.S_ISREG(st.st_mode) else None


def _look(pattern: PathPattern, paths: set[str], data: Path) -> Look:
    """What the watcher's paths show now: files stat'ed, folders moved in walked, folders gone noted."""
    seen: dict[str, Stat | None] = {}
    gone: list[str] = []
    for path in paths:
        if pattern.matches(path):
            seen[path] = _stat(path)
        if os.path.isdir(path) and not os.path.islink(path):  # a folder moved in (a link to one is not entered)
            seen.update(scan(pattern, data, under=path))
        elif not os.path.exists(path):
            gone.append(path)
    return Look(seen, gone_dirs=tuple(gone))


def scan(pattern: PathPattern, data: Path, under: str | None = None) -> dict[str, Stat]:
    """Every regular file the pattern matches (below `under`, when given), never inside data/ or the folders
    watchfiles ignores; linked folders are not followed."""
    top = under or pattern.root
    found: dict[str, Stat] = {}
    if pattern.single_file:
        path = os.path.join(pattern.root, pattern.parts[0])
        stat = _stat(path)
        return {path: stat} if stat is not None else {}
    skip = set(DefaultFilter.ignore_dirs)
    data_dir = str(data)
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in skip and os.path.join(folder, d) != data_dir
                   and pattern.may_contain(os.path.join(folder, d))]
        for name in files:
            path = os.path.join(folder, name)
            if pattern.matches(path):
                stat = _stat(path)
                if stat is not None:
                    found[path] = stat
    return found
