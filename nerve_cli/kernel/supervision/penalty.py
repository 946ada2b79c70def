"""Failure penalties and quarantine, as pure bookkeeping (time passed in).

- A sense failing `failure_backoff_after` times in a row (error, timeout, or
  its worker died while it computed) is backed off exponentially, doubling
  from `failure_backoff_first` up to `failure_backoff_max`; one success ends it.
- A worker's death is blamed on one sense only when that sense is its likely
  cause (`record_death`): its code was on the crashing thread's stack, or it
  was the only sense computing, or it was the one sense computing at every
  death of that worker within the window. A sense blamed for
  `quarantine_after` deaths within `quarantine_window` (deaths where nobody
  could be blamed count for it too, if it was computing then) is quarantined
  for `quarantine_for`: not computed at all, while the other senses of its
  group keep running; the reason says why it was blamed. A group-mate that
  merely lost its compute is not penalised for it. The expiry is an absolute
  time, so the engine can persist it and honour it after a restart.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from nerve_cli.config.model import EngineConfig, format_duration
from nerve_cli.vocab.outcomes import Outcome

FAILURES = {Outcome.ERROR, Outcome.TIMEOUT, Outcome.LOST}


@dataclass(frozen=True)
class Verdict:
    until: float
    why: str
    quarantine: bool


@dataclass(frozen=True)
class Blame:
    """The sense a worker's death is put down to, and why."""

    sense: str
    because: str  # e.g. "its code was on the crashing thread (senses/x/sense.py:5)"


@dataclass(frozen=True)
class Death:
    at: float
    computing: frozenset[str]
    culprit: str | None


class PenaltyBook:
    def __init__(self, settings: EngineConfig) -> None:
        self.settings = settings
        self.failures: dict[str, int] = {}
        self.deaths: dict[str, deque[Death]] = {}  # group → its worker's recent deaths

    def record_death(self, group: str, computing: frozenset[str], evidence: Blame | None,
                     now: float) -> Blame | None:
        """Account one death of `group`'s worker while `computing` ran; the likely culprit, if there is one.

        `evidence` is what the supervisor saw itself: the sense whose code was on
        the crashing thread, or the one it killed the worker for.
        """
        if not computing:
            return None  # nothing lost, and nothing to tell apart
        deaths = self._recent(group, now)
        blame = None
        if evidence is not None and evidence.sense in computing:
            blame = evidence
        elif len(computing) == 1:
            blame = Blame(next(iter(computing)), "it was the only sense computing")
        elif deaths:
            common = frozenset(computing).intersection(*(d.computing for d in deaths))
            if len(common) == 1:
                blame = Blame(next(iter(common)), f"it was computing at each of its worker's last "
                                                  f"{len(deaths) + 1} deaths; no other sense was")
        deaths.append(Death(now, frozenset(computing), blame.sense if blame else None))
        return blame

    def record(self, sense: str, outcome: Outcome, now: float, *, group: str | None = None,
               blame: Blame | None = None) -> Verdict | None:
        """Account one finished compute; a verdict when the sense must now wait.

        For a compute lost with its worker, `blame` is the death's likely culprit
        (None: nobody could be told apart): another sense's crash is not this
        sense's failure.
        """
        if outcome is Outcome.LOST and blame is not None and blame.sense != sense:
            return None
        if outcome not in FAILURES:
            self.failures.pop(sense, None)
            return None
        count = self.failures[sense] = self.failures.get(sense, 0) + 1
        if outcome is Outcome.LOST and blame is not None and group is not None:
            verdict = self._quarantine(sense, group, blame, now)
            if verdict is not None:
                return verdict
        after = self.settings.failure_backoff_after
        if count < after:
            return None
        wait = min(self.settings.failure_backoff_max, self.settings.failure_backoff_first * 2 ** (count - after))
        return Verdict(now + wait, f"failed {count} times in a row; backing off {format_duration(round(wait, 3))}", False)

    def _quarantine(self, sense: str, group: str, blame: Blame, now: float) -> Verdict | None:
        window = self.settings.quarantine_window
        deaths = self._recent(group, now)
        count = sum(1 for d in deaths if d.culprit == sense or (d.culprit is None and sense in d.computing))
        if count < self.settings.quarantine_after:
            return None
        deaths.clear()
        self.failures.pop(sense, None)
        return Verdict(now + self.settings.quarantine_for,
                       f"its worker died {count} times within {format_duration(window)} while it computed; "
                       f"blamed because {blame.because}", True)

    def _recent(self, group: str, now: float) -> deque[Death]:
        deaths = self.deaths.setdefault(group, deque())
        while deaths and deaths[0].at < now - self.settings.quarantine_window:
            deaths.popleft()
        return deaths

    def reset(self, sense: str) -> None:
        self.failures.pop(sense, None)
        for deaths in self.deaths.values():  # deaths it was blamed for no longer count
            kept = [d for d in deaths if d.culprit != sense]
            deaths.clear()
            deaths.extend(Death(d.at, d.computing - {sense}, d.culprit) for d in kept)
