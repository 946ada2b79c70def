"""`nerve mcp`'s resources, and how it notices that one changed (for subscriptions).

| URI | what it reads | changes when |
|---|---|---|
| `nerve://senses` | the `sense-list` document | any sense signals, or nerve.yaml changes |
| `nerve://sense/NAME` | the `sense-show` document (its tables, its latest signal) | the sense signals, or its files change |
| `nerve://sense/NAME/schema.py` | the sense's schema.py, as written | the file changes |
| `nerve://threads/waiting` | the `thread-list` document of threads waiting for a person | one starts or stops waiting |
| `nerve://thread/RUN` | the `thread-show` document | its status or its rounds change |

`Fingerprints` reads, for each URI asked about, a small value that changes
exactly when the resource does (the newest `_signals` id, a file's modification
time, the waiting threads' ids, one `workflow_runs` row): a few indexed reads
per look, from the files alone, with or without an engine. The server looks
every `POLL_S` while anyone is subscribed, and tells the subscribers of each
URI whose value moved.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from nerve_cli.home import Layout
from nerve_cli.store.sqlitefile import read_rows

POLL_S = 0.5  # how often subscribed resources are looked at
SENSES = "nerve://senses"
WAITING = "nerve://threads/waiting"
SENSE = "nerve://sense/{name}"
SCHEMA = "nerve://sense/{name}/schema.py"
THREAD = "nerve://thread/{run_id}"
_SENSE_RE = re.compile(r"^nerve://sense/([^/]+)\Z")
_SCHEMA_RE = re.compile(r"^nerve://sense/([^/]+)/schema\.py\Z")
_THREAD_RE = re.compile(r"^nerve://thread/([^/]+)\Z")


def sense_uri(name: str) -> str:
    return SENSE.format(name=name)


def thread_uri(run_id: str) -> str:
    return THREAD.format(run_id=run_id)


class Fingerprints:
    """The current value of each URI's change marker, and which moved since the last look."""

    def __init__(self, home: Path) -> None:
        self.layout = Layout(Path(home))
        self.seen: dict[str, Any] = {}

    def changed(self, uris: set[str]) -> set[str]:
        """The URIs among `uris` whose marker moved since they were last looked at (a new one is not news)."""
        out = set()
        for uri in uris:
            now = self.marker(uri)
            if uri in self.seen and self.seen[uri] != now:
                out.add(uri)
            self.seen[uri] = now
        for gone in set(self.seen) - uris:
            del self.seen[gone]
        return out

    def marker(self, uri: str) -> Any:
        if uri == SENSES:
            return (_mtime(self.layout.config), tuple(sorted(self._signal_heads().items())))
        if uri == WAITING:
            return tuple(r[0] for r in self._runs("SELECT run_id FROM workflow_runs WHERE status = 'waiting' "
                                                  "ORDER BY run_id", ()))
        if m := _SENSE_RE.match(uri):
            folder = self.layout.sense_dir(m.group(1))
            files = tuple(_mtime(folder / f) for f in ("sense.py", "schema.py"))
            return (_last_signal_id(self.layout.sense_db(m.group(1))), files)
        if m := _SCHEMA_RE.match(uri):
            return _mtime(self.layout.sense_dir(m.group(1)) / "schema.py")
        if m := _THREAD_RE.match(uri):
            rows = self._runs("SELECT status, ts FROM workflow_runs WHERE run_id = ?", (m.group(1),))
            return rows[0] if rows else None
        return None

    def _signal_heads(self) -> dict[str, int | None]:
        folder = self.layout.sense_data
        names = sorted(p.stem for p in folder.glob("*.db")) if folder.is_dir() else []
        return {name: _last_signal_id(self.layout.sense_db(name)) for name in names}

    def _runs(self, sql: str, params: tuple) -> list[tuple]:
        return read_rows(self.layout.logs_db, sql, params)


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _last_signal_id(path: Path) -> int | None:
    rows = read_rows(path, "SELECT max(id) FROM _signals", ())
    return rows[0][0] if rows else None
