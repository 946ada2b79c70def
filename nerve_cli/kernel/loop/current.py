"""The configuration the engine runs now: nerve.yaml as last loaded, and what is derived from it.

One holder, handed to every part that reads the config: a hot reload swaps it
here (`use`) and each part reads the new one on its next look.
"""

from __future__ import annotations

from dataclasses import dataclass

from nerve_cli.address import ListenAddress
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.projection import Reading, readings


class Current:
    def __init__(self, config: NerveConfig, warnings: list[str]) -> None:
        self.config = config
        self.warnings = warnings  # nerve.yaml's, shown and counted apart from errors
        self.readings: dict[str, Reading] = readings(config)  # how each sense with `on:` sources reads them
        self._bounds: dict[str | None, int] = {}  # sense → its causal depth bound, as asked

    def use(self, config: NerveConfig) -> None:
        self.config = config
        self.readings = readings(config)
        self._bounds = {}

    def causal_bound(self, sense: str | None) -> int:
        """The deepest a directive or an emit of `sense`'s computes may go (nerve.yaml's, asked once per config)."""
        bound = self._bounds.get(sense)
        if bound is None:
            bound = self._bounds[sense] = self.config.causal_bound(sense)
        return bound


@dataclass(frozen=True)
class Options:
    """How `nerve run` was asked to run."""

    run_for: float | None = None  # stop after this many seconds
    watch: bool = True  # hot reload
    metrics: ListenAddress | None = None  # --metrics (else engine.metrics)
    webhooks: ListenAddress | None = None  # --webhooks (else engine.webhooks)
