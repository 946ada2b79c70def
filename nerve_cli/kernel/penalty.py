"""Failure penalties and quarantine, as pure bookkeeping (time passed in).

- A sense failing `failure_backoff_after` times in a row (error, timeout, or
  its worker died while it computed) is backed off exponentially, doubling
  from `failure_backoff_first` up to `failure_backoff_max`; one success ends it.
- A sense that was computing when its worker died `quarantine_after` times
  within `quarantine_window` is quarantined for `quarantine_for`: not computed
  at all, while the other senses of its group keep running. The expiry is an
  absolute time, so the engine can persist it and honour it after a restart.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from nerve_cli.config.model import EngineConfig, format_duration

FAILURES = {"error", "timeout", "lost"}


@dataclass(frozen=True)
class Verdict:
    until: float
    why: str
    quarantine: bool


class PenaltyBook:
    def __init__(self, settings: EngineConfig) -> None:
        self.settings = settings
        self.failures: dict[str, int] = {}
        self.kills: dict[str, deque[float]] = {}

    def record(self, sense: str, outcome: str, now: float) -> Verdict | None:
        """Account one finished compute; a verdict when the sense must now wait."""
        if outcome not in FAILURES:
            self.failures.pop(sense, None)
            return None
        count = self.failures[sense] = self.failures.get(sense, 0) + 1
        if outcome == "lost":
            verdict = self._count_kill(sense, now)
            if verdict is not None:
                return verdict
        after = self.settings.failure_backoff_after
        if count < after:
            return None
        wait = min(self.settings.failure_backoff_max, self.settings.failure_backoff_first * 2 ** (count - after))
        return Verdict(now + wait, f"failed {count} times in a row; backing off {format_duration(round(wait, 3))}", False)

    def _count_kill(self, sense: str, now: float) -> Verdict | None:
        window = self.settings.quarantine_window
        kills = self.kills.setdefault(sense, deque())
        kills.append(now)
        while kills and kills[0] < now - window:
            kills.popleft()
        if len(kills) < self.settings.quarantine_after:
            return None
        count = len(kills)
        kills.clear()
        self.failures.pop(sense, None)
        return Verdict(now + self.settings.quarantine_for,
                       f"its worker died {count} times within {format_duration(window)} while it computed", True)

    def reset(self, sense: str) -> None:
        self.failures.pop(sense, None)
        self.kills.pop(sense, None)
