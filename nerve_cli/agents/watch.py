"""Waiting for an agent's news: a take now, else again whenever one of its databases commits.

Whoever writes — the engine, an offline `nerve emit`, another host's events
through the fleet, another waiter acknowledging — commits to one of the
agent's sources or to data/agents.db. A `Watch` holds a read connection to
each and asks SQLite's `PRAGMA data_version`, which changes when another
connection committed: a cheap question (no read of the data) asked every
`POLL` seconds, so a wait costs next to nothing while nothing happens, and
works with no engine at all. A database that does not exist yet is looked for
at each poll.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from nerve_cli.config.agents import agent_sources
from nerve_cli.config.model import AgentConfig, NerveConfig
from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.store.events import connect_readonly
from nerve_cli.store.inbox import Inbox, Taken, watched_paths

POLL = 0.02  # seconds between two looks at the databases' versions


class UnknownAgent(NerveError):
    type = ErrorType.USAGE
    exit_code = 2


class AgentDisabled(NerveError):
    type = ErrorType.USAGE


def agent_of(config: NerveConfig, name: str) -> AgentConfig:
    """The agent's settings, or a usage error naming the agents nerve.yaml has."""
    agent = config.agents.get(name)
    if agent is None:
        known = ", ".join(sorted(config.agents)) or "none yet"
        raise UnknownAgent(f"no agent {name!r} in nerve.yaml's `agents:` (agents: {known}); add one, e.g. "
                           f"`agents: {{{name}: {{on: [ci.done]}}}}`")
    return agent


@dataclass
class Watch:
    """The versions of a set of databases, to tell when any of them committed since the last look."""

    paths: list[Path]
    _conns: dict[Path, sqlite3.Connection] = field(default_factory=dict)
    _versions: dict[Path, int] = field(default_factory=dict)
    # a shared poller looks in a thread while its waiter may close the watch on the loop: one at a time, and a
    # closed watch opens nothing again
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def changed(self) -> bool:
        """True when a database committed (or appeared) since the last call (the first call: False; closed: False)."""
        with self._lock:
            return False if self._closed else self._changed()

    def _changed(self) -> bool:
        moved = False
        for path in self.paths:
            conn = self._conns.get(path)
            if conn is None:
                if not path.exists():
                    continue
                try:
                    conn = self._conns[path] = connect_readonly(path)
                except sqlite3.Error:
                    continue
                moved = moved or path in self._versions  # it appeared after we began: news
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error:
                conn.close()
                self._conns.pop(path, None)
                continue
            if self._versions.get(path, version) != version:
                moved = True
            self._versions[path] = version
        for path in self.paths:
            self._versions.setdefault(path, -1)
        return moved

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()


@dataclass
class Waiter:
    """One agent's takes: its sources and settings from nerve.yaml, a take as the inbox does it."""

    data: Path
    name: str
    agent: AgentConfig
    sources: dict[str, str]

    @classmethod
    def of(cls, data: Path, config: NerveConfig, name: str) -> "Waiter":
        agent = agent_of(config, name)
        if not agent.enabled:
            raise AgentDisabled(f"agent {name} is disabled (agents.{name}.enabled: false): nothing is handed to it; "
                                "its inbox keeps what it heard until it is enabled again")
        return cls(Path(data), name, agent, agent_sources(config, name))

    def take(self, inbox: Inbox, **how: Any) -> Taken:
        return inbox.take(self.name, self.sources, match=self.agent.match, batch=self.agent.batch,
                          start=self.agent.start, **how)

    def watch(self) -> Watch:
        return Watch(watched_paths(self.data, self.sources))


def wait(waiter: Waiter, inbox: Inbox, timeout: float | None, *, first: Mapping[str, Any],
         then: Mapping[str, Any] | None = None, stop: Callable[[], bool] | None = None) -> Taken:
    """Take (with `first`'s options: acknowledging the previous delivery, say), then take again (`then`)
    whenever a database commits, until something is handed, `timeout` passes or `stop()` says so (checked
    first: a hook whose harness is already gone takes nothing)."""
    if stop is not None and stop():
        return Taken(None)
    taken = waiter.take(inbox, **first)
    if taken.delivery is not None:
        return taken
    acked = taken.acked
    deadline = None if timeout is None else time.monotonic() + timeout
    watch = waiter.watch()
    watch.changed()
    try:
        while deadline is None or time.monotonic() < deadline:
            if stop is not None and stop():
                break
            time.sleep(POLL if deadline is None else max(0.0, min(POLL, deadline - time.monotonic())))
            if watch.changed():
                again = waiter.take(inbox, **(then or {k: v for k, v in first.items() if k != "ack_previous"}))
                if again.delivery is not None:
                    return Taken(again.delivery, acked + again.acked)
    finally:
        watch.close()
    return Taken(None, acked)


SHELLS = {"sh", "dash", "bash", "zsh", "ksh", "fish", "busybox"}


def _parent_of(pid: int) -> int | None:
    """The parent pid of `pid` from /proc (None: gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _name_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


HARNESSES = ("node", "claude", "codex", "opencode", "bun", "python")  # what a harness running as pid 1 is called


def harness_gone() -> Callable[[], bool]:
    """A check that turns true once the process that started this one is gone: the parent, or, when the
    parent is a shell running the hook's command line (`sh -c`), the shell's parent (the harness).

    A shell already handed to pid 1 when this starts was orphaned before we could look (the harness died
    right after starting the hook), unless pid 1 is itself a harness (one run as a container's first process).
    """
    parent = os.getppid()
    grand = _parent_of(parent) if _name_of(parent) in SHELLS else None
    orphaned = grand == 1 and not _name_of(1).startswith(HARNESSES)

    def gone() -> bool:
        if orphaned or os.getppid() != parent:
            return True
        return grand is not None and _parent_of(parent) != grand

    return gone
