"""The configuration the engine runs now: nerve.yaml as last loaded, and what is derived from it.

One holder, handed to every part that reads the config: a hot reload swaps it
here (`use`) and each part reads the new one on its next look; a part that
acts on a change itself (rather than at its next look) is told (`when_changed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from nerve_cli.address import ListenAddress
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.projection import Reading, readings
from nerve_cli.names import is_pattern, pattern_matches


class Current:
    def __init__(self, config: NerveConfig, warnings: list[str]) -> None:
        self.config = config
        self.warnings = warnings  # nerve.yaml's, shown and counted apart from errors
        self.readings: dict[str, Reading] = readings(config)  # how each sense with `on:` sources reads them
        self._bounds: dict[str | None, int] = {}  # sense → its causal depth bound, as asked
        self._into: dict[str, int] = {}  # source → the bound of what comes in on it, as asked
        self._told: list[Callable[[], None]] = []

    def use(self, config: NerveConfig) -> None:
        self.config = config
        self.readings = readings(config)
        self._bounds = {}
        self._into = {}
        for tell in self._told:
            tell()

    def when_changed(self, tell: Callable[[], None]) -> None:
        """Call `tell` after each `use` (on the engine's loop)."""
        self._told.append(tell)

    def causal_bound(self, sense: str | None) -> int:
        """The deepest a directive or an emit of `sense`'s computes may go (nerve.yaml's, asked once per config)."""
        bound = self._bounds.get(sense)
        if bound is None:
            bound = self._bounds[sense] = self.config.causal_bound(sense)
        return bound

    def bound_into(self, source: str) -> int:
        """The deepest an item arriving on `source` from outside this engine (another host) may be: the largest
        bound of the senses whose reflexes hear it, so a loop through hosts declared with `max_depth:` on a
        listener's reflex runs to that depth (else engine.max_causal_depth)."""
        bound = self._into.get(source)
        if bound is None:
            listeners = {r.sense for r in self.config.active_reflexes()
                         if any(on == source or (is_pattern(on) and pattern_matches(on, source)) for on in r.on)}
            bound = max((self.causal_bound(s) for s in listeners), default=self.causal_bound(None))
            self._into[source] = bound
        return bound


@dataclass(frozen=True)
class Options:
    """How `nerve run` was asked to run."""

    run_for: float | None = None  # stop after this many seconds
    watch: bool = True  # hot reload
    metrics: ListenAddress | None = None  # --metrics (else engine.metrics)
    webhooks: ListenAddress | None = None  # --webhooks (else engine.webhooks)
