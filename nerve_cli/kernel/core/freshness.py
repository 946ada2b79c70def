"""Freshness: a sense expected to signal every so often (`expect_signal_every`) that has not is *stale*.

Pure rules, time passed in. A sense is stale once `expect_signal_every` has
passed since the later of its last signal and the moment this engine began
expecting it (its start, or the reload that set the key): an engine that was
stopped for a day does not find every sense stale the moment it starts, it
gives each one period to speak. Its next signal makes it fresh again.

Each change is kept until the next `nerve-health` compute takes it
(`take_changes`), so the health signal says who went stale and who recovered
since the last one; the engine runs that compute at once on every change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nerve_cli.config.model import NerveConfig


@dataclass
class Changes:
    went_stale: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.went_stale or self.recovered)


class Freshness:
    def __init__(self) -> None:
        self.expected: dict[str, float] = {}  # sense → seconds between signals, at most
        self.last: dict[str, float] = {}  # sense → epoch seconds of its last signal
        self.watched_since: dict[str, float] = {}  # sense → when this engine began expecting it
        self.stale: dict[str, float] = {}  # sense → when it went stale
        self._changes = Changes()

    def apply_config(self, config: NerveConfig, now: float) -> None:
        """Expect what `config` says of its enabled senses; a sense that joins (or changes period) starts now."""
        expected = {name: s.expect_signal_every for name, s in config.enabled_senses().items()
                    if s.expect_signal_every is not None}
        for name in list(self.stale):
            if name not in expected:
                del self.stale[name]  # no longer expected: neither stale nor recovered
        for name, period in expected.items():
            if self.expected.get(name) != period:
                self.watched_since[name] = now
        self.expected = expected

    def deadline(self, sense: str) -> float | None:
        period = self.expected.get(sense)
        if period is None:
            return None
        return max(self.last.get(sense, 0.0), self.watched_since.get(sense, 0.0)) + period

    def signalled(self, sense: str, when: float) -> bool:
        """A signal of `sense`: True when it was stale (it recovered)."""
        self.last[sense] = max(when, self.last.get(sense, 0.0))
        if self.stale.pop(sense, None) is None:
            return False
        self._changes.recovered.append(sense)
        return True

    def check(self, now: float) -> list[str]:
        """The senses that went stale by `now` (each once)."""
        went = [name for name in self.expected
                if name not in self.stale and (self.deadline(name) or now + 1) <= now]
        for name in went:
            self.stale[name] = self.deadline(name) or now
        self._changes.went_stale.extend(went)
        return went

    def next_check(self) -> float | None:
        """When the next sense could go stale (none is due without a check before it)."""
        due = [d for name in self.expected if name not in self.stale and (d := self.deadline(name)) is not None]
        return min(due) if due else None

    def take_changes(self) -> Changes:
        changes, self._changes = self._changes, Changes()
        return changes
