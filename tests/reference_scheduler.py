"""The reflex rules as a straightforward scan over every sense: the reference the real scheduler is checked against.

This is the scheduler as it was before it kept its due times in heaps: every
`take_due` and `next_wakeup` walks every sense, which is O(N) per event but
obviously right. `tests/test_scheduler_equivalence.py` runs random event
sequences through both and requires identical starts and state.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.cron import next_fire
from nerve_cli.vocab.reasons import CRON, INTERVAL, Reason, TriggerKind

NEVER = float("inf")
NOW = float("-inf")


@dataclass
class SenseState:
    name: str
    throttle: float = 0.0
    intervals: list[tuple[float, float]] = field(default_factory=list)  # (interval, jitter)
    crons: list[tuple[str, str | None]] = field(default_factory=list)
    last_start: float | None = None
    last_complete: float | None = None
    cron_next: float | None = None
    jitter_offset: float = 0.0
    first_due: float | None = None  # never completed: its first slot, set when it is first found runnable
    running: bool = False
    pending: bool = False
    pending_reason: Reason | None = None
    blocked_until: float | None = None
    blocked_why: str | None = None
    quarantined: bool = False
    runs: int = 0
    coalesced: int = 0
    deferred: int = 0
    debounced: int = 0
    skipped: int = 0

    @property
    def interval(self) -> float | None:
        return min(i for i, _ in self.intervals) if self.intervals else None

    @property
    def jitter(self) -> float:
        return min(self.intervals)[1] if self.intervals else 0.0

    def interval_due(self) -> float | None:
        if self.interval is None:
            return None
        if self.last_complete is None:
            return NOW if self.first_due is None else self.first_due  # never ran: at its slot
        return max(self.last_complete, self.last_complete + self.interval + self.jitter_offset)

    def throttle_free(self) -> float:
        if self.last_start is None or self.throttle <= 0:
            return NOW
        return self.last_start + self.throttle

    def wants_at(self) -> float | None:
        """When this sense next wants a compute, ignoring throttle and blocks."""
        times = [t for t in (self.interval_due(), self.cron_next) if t is not None]
        if self.pending:
            times.append(NOW)
        return min(times) if times else None


@dataclass
class _Debounce:
    first: float
    fire_at: float


@dataclass(frozen=True)
class Listener:
    sense: str
    debounce: float | None
    max_wait: float | None


@dataclass(frozen=True)
class Start:
    sense: str
    reason: Reason
    due: float  # when it wanted to start (for lateness)


class Scheduler:
    """Decides what runs when. Holds no clock: every method that needs time takes `now` (epoch seconds)."""

    def __init__(self, config: NerveConfig, last_completions: dict[str, float] | None = None,
                 extra_senses: dict[str, float] | None = None, *, now: float = 0.0,
                 rng: random.Random | None = None) -> None:
        self.states: dict[str, SenseState] = {}
        self.listeners: dict[str, list[Listener]] = {}
        self.debounces: dict[tuple[str, int], _Debounce] = {}
        self.rng = rng or random.Random()
        self._extra = dict(extra_senses or {})
        self.apply_config(config, last_completions or {}, now=now)

    # configuration ---------------------------------------------------------
    def apply_config(self, config: NerveConfig, last_completions: dict[str, float] | None = None,
                     *, now: float = 0.0, extra_senses: dict[str, float | None] | None = None) -> None:
        """(Re)build triggers from config, keeping the runtime state of senses that stay."""
        if extra_senses is not None:
            self._extra = dict(extra_senses)
        self._release_debounces(NEVER)  # a burst in progress fires now rather than being lost
        old, completions = self.states, last_completions or {}
        previous_crons = {name: state.crons for name, state in old.items()}
        self.states = {}
        for name in [*config.enabled_senses(), *self._extra]:
            state = old.get(name) or SenseState(name, last_complete=completions.get(name))
            state.throttle = config.senses[name].throttle if name in config.senses else 0.0
            state.intervals, state.crons = [], []
            if name in self._extra:
                state.intervals.append((self._extra[name], 0.0))
            self.states[name] = state
        self.listeners = {}
        for reflex in config.active_reflexes():
            state = self.states[reflex.sense]
            if reflex.interval is not None:
                state.intervals.append((reflex.interval, reflex.jitter or 0.0))
            if reflex.cron is not None:
                state.crons.append((reflex.cron, reflex.timezone))
            for source in reflex.on:
                self.listeners.setdefault(source, []).append(
                    Listener(reflex.sense, reflex.debounce, reflex.max_wait))
        for state in self.states.values():
            if state.crons != previous_crons.get(state.name) or (state.crons and state.cron_next is None):
                base = state.last_complete if state.last_complete is not None else now
                state.cron_next = self._next_cron(state, base)
        self.timed = sum(1 for state in self.states.values() if state.intervals)

    @staticmethod
    def _next_cron(state: SenseState, after: float) -> float | None:
        if not state.crons:
            return None
        return min(next_fire(expr, tz, after) for expr, tz in state.crons)

    # events ----------------------------------------------------------------
    def trigger(self, sense: str, reason: Reason) -> bool:
        """Want one compute of `sense`. False if the sense is unknown or disabled."""
        state = self.states.get(sense)
        if state is None:
            return False
        if state.quarantined:
            state.skipped += 1
            return True
        if state.pending:
            state.coalesced += 1  # merged into the run already waiting
            if reason.kind in (TriggerKind.DEMAND, TriggerKind.READ):
                state.pending_reason = reason  # a person asked: it goes first in its group's queue
        else:
            state.pending, state.pending_reason = True, reason
        return True

    def on_signal(self, source: str, now: float = 0.0) -> list[str]:
        """A signal from a sense or an external channel: its listeners want a compute."""
        targets = []
        for index, listener in enumerate(self.listeners.get(source, [])):
            targets.append(listener.sense)
            if listener.debounce is None:
                self.trigger(listener.sense, Reason.signal(source))
                continue
            key = (source, index)
            burst = self.debounces.get(key)
            first = burst.first if burst else now
            if burst:
                self.states[listener.sense].debounced += 1
            limit = first + listener.max_wait if listener.max_wait is not None else NEVER
            self.debounces[key] = _Debounce(first, min(now + listener.debounce, limit))
        return targets

    def completed(self, sense: str, now: float) -> None:
        """A compute ended (any outcome, or its worker died). Pending triggers stay pending."""
        state = self.states.get(sense)
        if state is None:
            return
        state.running = False
        state.last_complete = now
        if state.jitter:
            state.jitter_offset = self.rng.uniform(-state.jitter, state.jitter)
        if state.crons and (state.cron_next is None or state.cron_next <= now):
            state.cron_next = self._next_cron(state, now)

    def block(self, sense: str, until: float, why: str, *, quarantine: bool = False) -> None:
        state = self.states.get(sense)
        if state is None:
            return
        state.blocked_until, state.blocked_why, state.quarantined = until, why, quarantine
        if quarantine:
            state.pending, state.pending_reason = False, None

    def unblock(self, sense: str) -> None:
        state = self.states.get(sense)
        if state is not None:
            state.blocked_until, state.blocked_why, state.quarantined = None, None, False

    # questions -------------------------------------------------------------
    def take_due(self, now: float, runnable: set[str] | None = None) -> list[Start]:
        """Senses to start now; they are marked running. `runnable` limits to senses whose worker is ready."""
        self._release_debounces(now)
        starts = []
        for state in self.states.values():
            if state.running or (runnable is not None and state.name not in runnable):
                continue
            held_until = NOW
            if state.blocked_until is not None:
                if now < state.blocked_until:
                    continue
                held_until = state.blocked_until
                self.unblock(state.name)
            if state.last_complete is None and state.first_due is None and state.interval is not None:
                # never completed: it first runs at the next instant whose place within a millisecond per
                # interval sense (at least 10 ms, at most min(interval, 1 s)) is the 10 ms slot its name's CRC-32
                # gives
                spread = min(state.interval, 1.0, max(0.01, self.timed * 0.001))
                slots = max(1, int(spread / 0.01 + 1e-9))
                phase = zlib.crc32(state.name.encode()) % slots / slots * spread
                state.first_due = now + (phase - now) % spread if spread > 0 else now
            wanted = state.wants_at()
            if wanted is None or wanted > now:
                continue
            reason = state.pending_reason if state.pending else self._timer_reason(state, now)
            free = state.throttle_free()
            if free > now:
                if not state.pending:
                    state.deferred += 1
                    state.pending, state.pending_reason = True, reason
                continue
            self._start(state, now)
            due = max(wanted, free, held_until)  # lateness counts from the end of a back-off, not from before it
            starts.append(Start(state.name, reason or INTERVAL, due if due != NOW else now))
        return starts

    def _timer_reason(self, state: SenseState, now: float) -> Reason:
        return CRON if state.cron_next is not None and state.cron_next <= now else INTERVAL

    def _start(self, state: SenseState, now: float) -> None:
        state.running, state.pending, state.pending_reason = True, False, None
        state.last_start = now
        state.runs += 1
        if state.cron_next is not None and state.cron_next <= now:
            state.cron_next = self._next_cron(state, now)

    def _release_debounces(self, now: float) -> None:
        for key, burst in list(self.debounces.items()):
            if burst.fire_at <= now:
                del self.debounces[key]
                source, index = key
                listener = self.listeners.get(source, [])[index] if index < len(self.listeners.get(source, [])) else None
                if listener is not None:
                    self.trigger(listener.sense, Reason.debounced(source))

    def next_wakeup(self, runnable: set[str] | None = None) -> float | None:
        """The earliest time `take_due` could return something without a new event."""
        times = [b.fire_at for b in self.debounces.values()]
        for state in self.states.values():
            if state.running or (runnable is not None and state.name not in runnable):
                continue
            when = self._next_start(state)
            if when is not None:
                times.append(when)
        return min(times) if times else None

    def next_due(self, sense: str) -> float | None:
        state = self.states.get(sense)
        return None if state is None or state.running else self._next_start(state)

    @staticmethod
    def _next_start(state: SenseState) -> float | None:
        wanted = state.wants_at()
        if state.quarantined:
            return state.blocked_until  # wakes to lift the quarantine
        if wanted is None:
            return None
        return max(wanted, state.throttle_free(), state.blocked_until or NOW)

    def pending_count(self) -> int:
        return sum(1 for s in self.states.values() if s.pending)
