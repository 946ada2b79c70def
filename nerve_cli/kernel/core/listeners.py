"""Listener health: how far behind each listener is on each of its sources, for status, top and the metrics.

A *listener* is a sense whose compute takes `trigger` and whose reflexes name
sources (`on:` senses and channels, `paths:` patterns). Its *backlog* on a
source is the events beyond its cursor, and their age is the age of the
oldest. A listener falls behind when it is disabled, quarantined, failing,
held by a dead worker or slower than its sources; all of those show here.

Which senses count: an enabled one whose worker says it takes `trigger`
(`Delivery.takers`), or that no worker has loaded yet and whose sense.py
names a third parameter (read, not imported); a disabled one when its
sense.py does, with the sources of every reflex naming it (a disable turns
them off with it, and an enable brings them back). Not a sense whose bindings
take parameters: each set of values has its own cursors, brought up to date
when it is read, and no one backlog.

The counts come from the files (`store.events.backlog`), read in a thread and
kept for `TTL` seconds, so `nerve top` asking twice a second costs one read.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterable

from nerve_cli.config.mesh import sources_of
from nerve_cli.config.model import NerveConfig
from nerve_cli.home import Layout
from nerve_cli.store.events import SourceBacklog, backlog
from nerve_cli.usercode import compute_takes_trigger
from nerve_cli.vocab.sources import SourceKind

TTL = 1.0  # seconds a snapshot is served before the files are read again

Snapshot = dict[str, list[SourceBacklog]]  # listener → its sources' backlogs, in `on:` order then `paths:`


def listeners_of(config: NerveConfig, home: Path, takers: set[str], loaded: set[str]) -> dict[str, dict[str, str]]:
    """listener → {source: kind}: the senses whose backlog is worth showing (see the module docstring)."""
    active = sources_of(config)
    bound = {r.sense for r in config.reflexes if r.params}  # its events wait per set of values, read by read
    out: dict[str, dict[str, str]] = {}
    for name, settings in config.senses.items():
        if name in bound:
            continue
        if settings.enabled:
            sources = active.get(name)
            takes = name in takers if name in loaded else _reads_trigger(home, name)
        else:
            sources = all_sources(config, name)
            takes = _reads_trigger(home, name)
        if sources and takes:
            out[name] = sources
    return out


def all_sources(config: NerveConfig, sense: str) -> dict[str, str]:
    """Every source any reflex of `sense` names, enabled or not (a disabled sense's reflexes are off with it)."""
    out: dict[str, str] = {}
    for reflex in config.reflexes:
        if reflex.sense == sense:
            for source in reflex.on:
                out[source] = config.source_kind(source)
            out.update({pattern: SourceKind.FILE for pattern in reflex.paths})
    return out


def _reads_trigger(home: Path, sense: str) -> bool:
    return compute_takes_trigger(Layout(Path(home)).sense_dir(sense) / "sense.py")


class ListenerHealth:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.data = Layout(self.home).data
        self.last: Snapshot = {}
        self._at = 0.0
        self._reading: asyncio.Future | None = None

    async def snapshot(self, listeners: dict[str, dict[str, str]]) -> Snapshot:
        """The backlogs of `listeners`, read at most `TTL` ago (one read at a time, shared by whoever asks)."""
        if time.monotonic() - self._at < TTL and set(self.last) == set(listeners):
            return self.last
        if self._reading is None:
            loop = asyncio.get_running_loop()
            self._reading = loop.run_in_executor(None, self._read, dict(listeners))
        reading = self._reading
        try:
            self.last = await asyncio.shield(reading)
            self._at = time.monotonic()
        finally:
            if self._reading is reading and reading.done():
                self._reading = None
        return self.last

    def _read(self, listeners: dict[str, dict[str, str]]) -> Snapshot:
        return {name: backlog(self.data, name, sources) for name, sources in listeners.items()}


def totals(found: Iterable[SourceBacklog]) -> tuple[int, int | None]:
    """(waiting events, unix ms of the oldest) over a listener's sources."""
    found = list(found)
    oldest = [b.oldest_ts for b in found if b.oldest_ts is not None]
    return sum(b.events for b in found), min(oldest) if oldest else None
