"""Freshness kept on time: each sense's `expect_signal_every`, watched by one timer.

The rules are `kernel.core.freshness` (pure); this part reads the senses' last
signals at start (off the loop), marks what went stale when its deadline
passes, says when a sense signals again, and tells nerve-health at once
(`trigger`) either way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.control.health import HEALTH_SENSE
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.store.events import last_signal_ms
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import FRESHNESS, Reason


class FreshnessWatch:
    def __init__(self, freshness: Freshness, sense_db: Callable[[str], Path], log: Log, report: Report,
                 trigger: Callable[[str, Reason], None]) -> None:
        self.freshness = freshness
        self.sense_db = sense_db
        self.log = log
        self.report = report
        self.trigger = trigger
        self.stopping = False
        self._timer: asyncio.TimerHandle | None = None

    async def load(self, config: NerveConfig) -> None:
        """Expect what nerve.yaml says, counting from each sense's last signal on disk (read off the loop)."""
        self.freshness.apply_config(config, time.time())
        names = list(self.freshness.expected)
        found = await asyncio.get_running_loop().run_in_executor(
            None, lambda: {n: last_signal_ms(self.sense_db(n)) for n in names})
        for name, ms in found.items():
            if ms is not None:
                self.freshness.last[name] = ms / 1000

    def apply_config(self, config: NerveConfig) -> None:
        self.freshness.apply_config(config, time.time())
        self.rearm()

    def signalled(self, sense: str) -> None:
        """`sense` signalled: fresh again if it was stale."""
        if sense in self.freshness.expected and self.freshness.signalled(sense, time.time()):
            self.log(logrows.sense_fresh(sense, self.freshness.expected[sense]))
            self.report("info", f"{sense} signals again: fresh")
            self.trigger(HEALTH_SENSE, FRESHNESS)
            self.rearm()

    def check(self) -> None:
        """Mark what went stale, tell nerve-health at once, and arm the timer for the next deadline."""
        self._timer = None
        if self.stopping:
            return
        for sense in self.freshness.check(time.time()):
            period = self.freshness.expected[sense]
            last = self.freshness.last.get(sense)
            self.log(logrows.sense_stale(sense, period, None if last is None else int(last * 1000)))
            self.report("warn", f"{sense} is stale: no signal for {period:g}s (expect_signal_every)")
            self.trigger(HEALTH_SENSE, FRESHNESS)
        wake = self.freshness.next_check()
        if wake is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(loop.time() + max(0.0, wake - time.time()), self.check)

    def rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.check()

    def stop(self) -> None:
        self.stopping = True
        if self._timer is not None:
            self._timer.cancel()
