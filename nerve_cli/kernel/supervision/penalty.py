"""Failure penalties and quarantine, as pure bookkeeping (time passed in).

- A sense failing `failure_backoff_after` times in a row (error, timeout, or
  its worker died while it computed) is backed off exponentially, doubling
  from `failure_backoff_first` up to `failure_backoff_max`; one success ends it.
- A worker's death is blamed on a sense only on evidence that its code caused
  it (`record_death`, evidence gathered by the supervisor): its code was on the
  crashing thread's stack, a thread its code started crashed, its code called
  what ends or deafens the worker (os._exit, closing the protocol pipe...), or
  the kernel killed the worker for it. Never because it was computing: a sense
  whose background thread kills the worker while a group-mate computes is the
  one blamed, and a death nothing explains is no one sense's. A sense blamed for
  `quarantine_after` deaths within `quarantine_window` is quarantined for
  `quarantine_for` (computing or not when its worker died): not computed at
  all, while the other senses of its group keep running; the reason says why
  it was blamed. A compute lost with its worker counts as a failure only for
  the sense blamed: for the others it is neither a failure nor a success. The
  expiry is an absolute time, so the engine can persist it and honour it after
  a restart.
- Deaths nothing explains (no sense's code shows: a raw libc `_exit` or
  signal, a crash with the fatal-error dump off, the protocol's fds closed or
  replaced by a syscall the worker cannot see) still end a crash loop: at
  `quarantine_after` of them within the window the whole group is quarantined
  with a message saying no sense could be named. A mate is never named alone;
  the fix is to split the group to find which. A worker killed from outside
  (SIGKILL that the kernel did not send: a person, the OOM killer) and a kill
  already counted as a broken limit are not counted here.
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
    file: str | None = None  # where its code crashed the worker, when a fatal-error dump shows it
    line: int | None = None


@dataclass(frozen=True)
class Death:
    at: float
    computing: frozenset[str]
    culprit: str | None
    unexplained: bool = False  # no evidence and not otherwise accounted for: counts toward the group's quarantine


class PenaltyBook:
    def __init__(self, settings: EngineConfig) -> None:
        self.settings = settings
        self.failures: dict[str, int] = {}
        self.deaths: dict[str, deque[Death]] = {}  # group → its worker's recent deaths
        self.breaches: dict[str, deque[float]] = {}  # group → when its limits were broken with nobody to name

    def record_death(self, group: str, computing: frozenset[str], evidence: Blame | None, now: float, *,
                     why: str = "", counted: bool = False) -> tuple[Blame | None, Verdict | None]:
        """Account one death of `group`'s worker (`computing`: what it lost): (the culprit, or None when no
        evidence names one; a quarantine verdict when the culprit has now killed its worker too often — for
        the culprit, or, with no culprit, for the whole group when deaths nobody explains keep coming).

        `evidence` is what the supervisor found: the sense whose code caused the
        death. Which senses were computing never makes a culprit. `counted`: the
        death is already accounted for elsewhere (a broken limit), or is no
        sense's doing (killed from outside); `why` is how the worker ended.
        """
        deaths = self._recent(group, now)
        deaths.append(Death(now, frozenset(computing), evidence.sense if evidence else None,
                            unexplained=evidence is None and not counted))
        if evidence is not None:
            return evidence, self._quarantine(evidence.sense, group, evidence, now)
        unexplained = sum(1 for d in deaths if d.unexplained)
        if counted or unexplained < self.settings.quarantine_after:
            return None, None
        deaths.clear()
        return None, Verdict(now + self.settings.quarantine_for,
                             f"worker group {group}'s worker died {unexplained} times within "
                             f"{format_duration(self.settings.quarantine_window)} (last: {why or 'unknown'}) and no "
                             "sense's code could be named (nothing of it on the crashing thread, no call the worker "
                             "saw), so every sense of the group is quarantined; give each sense a group of its own "
                             "to find which, then `nerve sense reset NAME`", True)

    def record(self, sense: str, outcome: Outcome, now: float, *, group: str | None = None,
               blame: Blame | None = None) -> Verdict | None:
        """Account one finished compute; a verdict when the sense must now wait.

        For a compute lost with its worker, `blame` is the death's likely culprit
        (None: nobody could be told apart): another sense's crash is not this
        sense's failure.
        """
        if outcome is Outcome.LOST and (blame is None or blame.sense != sense):
            return None  # its worker died of something else (or of nothing known): not this sense's failure
        if outcome not in FAILURES:
            self.failures.pop(sense, None)
            return None
        count = self.failures[sense] = self.failures.get(sense, 0) + 1
        after = self.settings.failure_backoff_after
        if count < after:
            return None
        wait = min(self.settings.failure_backoff_max, self.settings.failure_backoff_first * 2 ** (count - after))
        return Verdict(now + wait, f"failed {count} times in a row; backing off {format_duration(round(wait, 3))}", False)

    def record_breach(self, group: str, problem: str, now: float) -> Verdict | None:
        """A limit of `group` broken with no sense's code to name (a leak in the worker's own memory, threads
        nobody announced); at `quarantine_after` of them within the window, a quarantine for the whole group."""
        window = self.settings.quarantine_window
        breaches = self.breaches.setdefault(group, deque())
        while breaches and breaches[0] < now - window:
            breaches.popleft()
        breaches.append(now)
        if len(breaches) < self.settings.quarantine_after:
            return None
        breaches.clear()
        return Verdict(now + self.settings.quarantine_for,
                       f"worker group {group} broke its limits {self.settings.quarantine_after} times within "
                       f"{format_duration(window)} ({problem}) and no sense's code could be named (no sense's "
                       "threads, processes or compute stood out), so every sense of the group is quarantined; "
                       "find what grows, then `nerve sense reset NAME`", True)

    def _quarantine(self, sense: str, group: str, blame: Blame, now: float) -> Verdict | None:
        window = self.settings.quarantine_window
        deaths = self._recent(group, now)
        count = sum(1 for d in deaths if d.culprit == sense)
        if count < self.settings.quarantine_after:
            return None
        deaths.clear()
        self.failures.pop(sense, None)
        return Verdict(now + self.settings.quarantine_for,
                       f"its worker died {count} times within {format_duration(window)} because of it; "
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
