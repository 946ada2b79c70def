"""When a listener must run again to receive its events (the kernel's half of exactly-once delivery).

The worker reads a compute's events and moves its cursors inside the
compute's transaction (`worker.events`); the kernel only decides *when* a
listener runs. Besides the usual `on:` trigger, it runs one again when:

- its compute answered `more` (a batch limit left events waiting): at once;
- its compute failed, timed out or was lost with its worker, and the files say
  it still has unconsumed events: at once (the failure back-off spaces
  repeated failures) — reason `retry`;
- its worker (re)started (engine start, respawn, hot reload) and it has
  unconsumed events: this is how events emitted while the engine was stopped,
  or while the listener's worker was down, are delivered — reason `backlog`;
- a reload gave it new sources that already hold events.

Those looks read the files off the loop; a compute of the listener that
started meanwhile reads what they saw, so a look that comes back after one
started asks for nothing (a compute then would run empty) and is made again
once that compute is over.

Only senses whose compute takes `trigger` are listeners in this sense (the
worker says which in `Ready`); the others run exactly as before. A source a
sense reads lazily (`lazy: true`) never runs it from here: its events wait
until the sense is read (`Engine.read`), which brings it up to date.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Callable, Iterable

from nerve_cli.config.mesh import filters_of, sources_of
from nerve_cli.config.model import NerveConfig
from nerve_cli.store.events import has_backlog
from nerve_cli.vocab.reasons import BACKLOG, RETRY, Reason


class Delivery:
    def __init__(self, data: Path, config: NerveConfig, trigger: Callable[[str, Reason], None],
                 starts: Callable[[str], int] = lambda _sense: 0) -> None:
        """`trigger(sense, reason)` asks the scheduler for one more compute and pumps; `starts(sense)` counts
        the computes of `sense` started so far (the scheduler's)."""
        self.data = Path(data)
        self.trigger = trigger
        self.starts = starts
        self.again: dict[str, Reason] = {}  # a look answered while a compute read: looked at once it is over
        self.sources: dict[str, dict[str, str]] = sources_of(config)
        self.eager: dict[str, dict[str, str]] = sources_of(config, eager_only=True)
        self.filters: dict[str, dict[str, dict]] = filters_of(config)
        self.takers: set[str] = set()

    def apply_config(self, config: NerveConfig) -> None:
        old, self.eager = self.eager, sources_of(config, eager_only=True)
        self.sources, self.filters = sources_of(config), filters_of(config)
        changed = [s for s in self.eager if self.eager[s] != old.get(s)]
        self.check(changed, BACKLOG)

    def sources_for(self, sense: str) -> dict[str, str] | None:
        return self.sources.get(sense)

    def ready(self, senses: Iterable[str], takers: Iterable[str]) -> None:
        """A worker is up with `senses` loaded, `takers` of them taking `trigger`."""
        senses = set(senses)
        self.takers = (self.takers - senses) | set(takers)
        self.check(sorted(set(takers) & senses), BACKLOG)

    def answered(self, sense: str, more: bool) -> None:
        again = self.again.pop(sense, None)
        if more and sense in self.eager:  # a lazy sense's reader asks again itself
            self.trigger(sense, BACKLOG)
        elif again is not None:
            self.check([sense], again)

    def failed(self, sense: str) -> None:
        self.again.pop(sense, None)
        self.check([sense], RETRY)

    def check(self, senses: Iterable[str], reason: Reason) -> None:
        """Trigger each listener that has unconsumed events (the files are read off the loop)."""
        wanted = [(s, dict(self.eager[s])) for s in senses if s in self.takers and self.eager.get(s)]
        if not wanted:
            return
        loop = asyncio.get_running_loop()
        for sense, sources in wanted:
            done = loop.run_in_executor(None, has_backlog, self.data, sense, sources, self.filters.get(sense))
            done.add_done_callback(functools.partial(self._checked, sense, reason, self.starts(sense)))

    def _checked(self, sense: str, reason: Reason, started: int, done: asyncio.Future) -> None:
        if done.cancelled() or done.exception() is not None or not done.result():
            return
        if self.starts(sense) != started:
            # a compute started while the files were read: it reads what they showed (and what arrives after
            # it read is routed to it as usual); a compute now would run empty. Look again once it is over,
            # for what it may have left (a failure, or events stored without this engine meanwhile).
            self.again.setdefault(sense, reason)
            return
        self.trigger(sense, reason)
