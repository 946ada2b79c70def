"""The reflex rules as pure logic: time is passed in, nothing sleeps.

The engine feeds it events (a signal, a demand, a completion) and asks two
questions: which senses start now (`take_due`), and when is the next moment
anything could become due (`next_wakeup`). The rules:

- interval: due at last *completed* compute + interval (± jitter); the
  completion time comes from disk at start-up, so an overdue sense runs once
  after a restart and then keeps its rhythm (no back-fill); a sense that never
  completed runs at its first *slot*: the next instant, from when it is first
  found runnable, whose 10 ms slot within a millisecond per interval sense (at
  most min(interval, 1 s)) its name gives (`first_slot`). Senses that start
  together are so spread instead of running in one burst and staying in phase
  (an interval counts from completion, so a burst's queueing would be added to
  every next due time), while a few senses still share a slot and its wake-up;
- cron: due at the first fire time after the last completion (a fire missed
  while the engine was down runs once, like an overdue interval);
- on signal: a signal from a source marks its listeners wanted; through a
  `debounce` reflex a burst becomes one trigger after the quiet period, never
  later than `max_wait` after the burst began;
- coalescing: one compute per sense at a time; any number of triggers while it
  runs (or while it waits) become exactly one pending run;
- throttle: never two starts closer than `throttle`; a trigger inside the
  window waits for the window's end, it is not dropped;
- blocks: a penalised sense waits out its back-off (triggers stay pending); a
  quarantined one is not computed at all (triggers are counted and skipped);
- disabled senses and reflexes do nothing;
- paused senses (`pause`) keep their triggers and start nothing until resumed (then once, like an overdue
  interval).

Cost: an event touches only the senses it concerns. Each sense's next
"look at me" time (`visit`: it may start, turn a due timer into a pending run
inside its throttle window, or lift a block) and its next possible start
(`wake`) sit in two heaps with lazy invalidation (an entry counts only while
it equals the sense's current key; stale ones are dropped when they surface,
and the heap is rebuilt when they outnumber the live ones). A sense whose
worker cannot take computes is *held*: it keeps its triggers but leaves the
heaps until `set_runnable` releases it. So `take_due` costs O(k log N) for k
senses due and `next_wakeup` O(log N) amortised, whatever N is.
`tests/reference_scheduler.py` is the same rules as a plain scan over every
sense; a property test requires both to start the same senses.
"""

from __future__ import annotations

import heapq
import random
import zlib
from dataclasses import dataclass, field
from typing import Iterable

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.cron import next_fire
from nerve_cli.names import pattern_matches
from nerve_cli.vocab.reasons import CRON, INTERVAL, Reason, TriggerKind
from nerve_cli.vocab.sources import SourceKind

NEVER = float("inf")
NOW = float("-inf")
FIRST_SPREAD = 1.0  # seconds: the first runs of senses that never completed are spread over at most this
FIRST_PER_SENSE = 0.001  # seconds of spread per interval sense: about what a worker takes for a small compute
FIRST_SLOT = 0.01  # seconds: first runs fall on slots this far apart, so senses in one slot share a wake-up


def first_spread(interval: float, senses: int) -> float:
    """Over how long the first runs of `senses` interval senses (this one among them) are spread: a millisecond
    each, at least one slot, at most FIRST_SPREAD or the interval. Enough that no worker is handed a burst to
    queue, and no more, so a few senses still share the engine's wake-ups."""
    return min(interval, FIRST_SPREAD, max(FIRST_SLOT, senses * FIRST_PER_SENSE))


def first_slot(name: str, interval: float, now: float, senses: int = 1) -> float:
    """When a sense that never completed first runs, found runnable at `now`: the next instant (`now` included)
    whose place within `first_spread` is the sense's slot, given by its name alone (no randomness: the same
    sense takes the same slot on every start, in every process, for the same number of interval senses)."""
    spread = first_spread(interval, senses)
    if spread <= 0:
        return now
    slots = max(1, int(spread / FIRST_SLOT + 1e-9))
    phase = zlib.crc32(name.encode()) % slots / slots * spread
    return now + (phase - now) % spread


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
    first_due: float | None = None  # never completed: its first slot, once it was found runnable (`first_slot`)
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
    # bookkeeping of the heaps (not rules): see the module docstring
    held: bool = False
    paused: bool = False  # `nerve sense pause`: like held, but a person's (the scheduler's `paused` set)
    queued_since: float | None = None  # taken (running, to these rules) and waiting in its group's queue
    queued_priority: str | None = None
    order: int = 0  # position in config order: starts are listed in it
    visit_at: float | None = None
    wake_at: float | None = None

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
            return NOW if self.first_due is None else self.first_due  # never ran: at its slot, once it has one
        return max(self.last_complete, self.last_complete + self.interval + self.jitter_offset)

    def throttle_free(self) -> float:
        if self.last_start is None or self.throttle <= 0:
            return NOW
        return self.last_start + self.throttle

    def wants_at(self) -> float | None:
        """When this sense next wants a compute, ignoring throttle and blocks."""
        if self.pending:
            return NOW
        due, cron = self.interval_due(), self.cron_next
        if due is None:
            return cron
        return due if cron is None or due <= cron else cron

    def keys(self) -> tuple[float | None, float | None]:
        """(when `take_due` must next look at this sense, `next_start`): the two heap keys, computed on every
        change of this sense. Looking may start it, defer it into pending, or lift its block."""
        wanted = self.wants_at()
        if self.blocked_until is not None:
            visit: float | None = self.blocked_until
        elif wanted is None:
            visit = None
        else:
            visit = max(wanted, self.throttle_free()) if self.pending else wanted
        if self.quarantined:
            return visit, self.blocked_until
        if wanted is None:
            return visit, None
        return visit, max(wanted, self.throttle_free(), self.blocked_until or NOW)

    def next_start(self) -> float | None:
        """The earliest this sense could start without a new event (a quarantine wakes to lift itself)."""
        wanted = self.wants_at()
        if self.quarantined:
            return self.blocked_until
        if wanted is None:
            return None
        return max(wanted, self.throttle_free(), self.blocked_until or NOW)


@dataclass
class _Debounce:
    first: float
    fire_at: float
    seq: int  # bursts released together trigger in the order they began
    source: str | None = None  # a pattern's burst: the channel that last signalled (the trigger names it)


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
    """Decides what runs when. Holds no clock: every method that needs time takes `now` (epoch seconds).

    `hold_new`: senses joining (at construction or by `apply_config`) start held,
    for a kernel whose workers are not ready yet; `extra_senses` (computed by the
    kernel itself) never are.
    """

    def __init__(self, config: NerveConfig, last_completions: dict[str, float] | None = None,
                 extra_senses: dict[str, float | None] | None = None, *, now: float = 0.0,
                 rng: random.Random | None = None, hold_new: bool = False) -> None:
        self.states: dict[str, SenseState] = {}
        self.listeners: dict[str, list[Listener]] = {}  # by source name, or by pattern (`pr.*`)
        self.patterns: list[str] = []  # the keys of `listeners` that are patterns over channel names
        self.debounces: dict[tuple[str, int], _Debounce] = {}
        self.rng = rng or random.Random()
        self.hold_new = hold_new
        self._extra = dict(extra_senses or {})
        self._visits: list[tuple[float, str]] = []
        self._wakes: list[tuple[float, str]] = []
        self._bursts: list[tuple[float, int, tuple[str, int]]] = []
        self._burst_seq = 0
        self.paused: set[str] = set()  # senses a person paused: kept across reloads, even while not configured
        self.apply_config(config, last_completions or {}, now=now)

    # configuration ---------------------------------------------------------
    def apply_config(self, config: NerveConfig, last_completions: dict[str, float] | None = None,
                     *, now: float = 0.0, extra_senses: dict[str, float | None] | None = None) -> None:
        """(Re)build triggers from config, keeping the runtime state of senses that stay; `extra_senses`: the
        kernel's own senses with their intervals now (engine.health_interval changed), when given."""
        if extra_senses is not None:
            self._extra = dict(extra_senses)
        self._release_debounces(NEVER)  # a burst in progress fires now rather than being lost
        old, completions = self.states, last_completions or {}
        previous_crons = {name: state.crons for name, state in old.items()}
        self.states = {}
        for name in [*config.enabled_senses(), *self._extra]:
            state = old.get(name)
            if state is None:
                state = SenseState(name, last_complete=completions.get(name),
                                   held=self.hold_new and name not in self._extra)
            state.throttle = config.senses[name].throttle if name in config.senses else 0.0
            state.paused = name in self.paused
            state.intervals, state.crons = [], []
            every = self._extra.get(name)
            if every is not None:  # a kernel sense may have no interval (it runs when asked)
                state.intervals.append((every, 0.0))
            self.states[name] = state
        self.listeners = {}
        for reflex in config.active_reflexes():
            state = self.states[reflex.sense]
            if reflex.interval is not None:
                state.intervals.append((reflex.interval, reflex.jitter or 0.0))
            if reflex.cron is not None:
                state.crons.append((reflex.cron, reflex.timezone))
            for source in [] if reflex.lazy else reflex.on:  # a lazy source's events wait for a read
                self.listeners.setdefault(source, []).append(
                    Listener(reflex.sense, reflex.debounce, reflex.max_wait))
        self.patterns = [p for p in self.listeners if config.source_kind(p) is SourceKind.PATTERN]
        for state in self.states.values():
            if state.crons != previous_crons.get(state.name) or (state.crons and state.cron_next is None):
                base = state.last_complete if state.last_complete is not None else now
                state.cron_next = self._next_cron(state, base)
        self._timed = sum(1 for state in self.states.values() if state.intervals)  # interval senses (first_spread)
        self._visits, self._wakes = [], []
        for order, state in enumerate(self.states.values()):
            state.order, state.visit_at, state.wake_at = order, None, None
            self._reschedule(state)

    @staticmethod
    def _next_cron(state: SenseState, after: float) -> float | None:
        if not state.crons:
            return None
        return min(next_fire(expr, tz, after) for expr, tz in state.crons)

    # events ----------------------------------------------------------------
    def starts(self, sense: str) -> int:
        """How many computes of `sense` this scheduler has started (0: none, or no such sense)."""
        state = self.states.get(sense)
        return state.runs if state is not None else 0

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
                state.pending_reason = reason  # a person asked: the run goes at the top of its group's queue
        else:
            state.pending, state.pending_reason = True, reason
            self._reschedule(state)
        return True

    def on_signal(self, source: str, now: float = 0.0) -> list[str]:
        """A signal from a sense or an external channel: its listeners want a compute (those of the patterns
        that match the channel too: each trigger names `source` itself, never the pattern)."""
        targets: list[str] = []
        self._heard(source, source, now, targets)
        for pattern in self.patterns:
            if pattern_matches(pattern, source):
                self._heard(pattern, source, now, targets)
        return targets

    def _heard(self, heard: str, source: str, now: float, targets: list[str]) -> None:
        """The listeners of `heard` (`source`, or a pattern matching it) want a compute."""
        for index, listener in enumerate(self.listeners.get(heard, ())):
            targets.append(listener.sense)
            if listener.debounce is None:
                self.trigger(listener.sense, Reason.signal(source))
                continue
            key = (heard, index)
            burst = self.debounces.get(key)
            if burst is None:
                self._burst_seq += 1
                burst = self.debounces[key] = _Debounce(now, NEVER, self._burst_seq)
            else:
                self.states[listener.sense].debounced += 1
            burst.source = source
            limit = burst.first + listener.max_wait if listener.max_wait is not None else NEVER
            burst.fire_at = min(now + listener.debounce, limit)
            self._push(self._bursts, (burst.fire_at, burst.seq, key))

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
        self._reschedule(state)

    def block(self, sense: str, until: float, why: str, *, quarantine: bool = False) -> None:
        state = self.states.get(sense)
        if state is None:
            return
        state.blocked_until, state.blocked_why, state.quarantined = until, why, quarantine
        if quarantine:
            state.pending, state.pending_reason = False, None
        self._reschedule(state)

    def unblock(self, sense: str) -> None:
        state = self.states.get(sense)
        if state is not None:
            state.blocked_until, state.blocked_why, state.quarantined = None, None, False
            self._reschedule(state)

    def set_runnable(self, senses: Iterable[str], runnable: bool) -> None:
        """Hold senses whose worker cannot take computes (they keep their triggers), or release them."""
        for name in senses:
            state = self.states.get(name)
            if state is not None and state.held == runnable:
                state.held = not runnable
                self._reschedule(state)

    def pause(self, senses: Iterable[str], paused: bool) -> None:
        """Pause senses (they keep their triggers and start nothing) or resume them."""
        for name in senses:
            (self.paused.add if paused else self.paused.discard)(name)
            state = self.states.get(name)
            if state is not None and state.paused != paused:
                state.paused = paused
                self._reschedule(state)

    def _sync_runnable(self, runnable: set[str]) -> None:
        """`runnable` given to take_due/next_wakeup: exactly these senses are runnable from now on (O(N))."""
        for name, state in self.states.items():
            if state.held == (name in runnable):
                state.held = not state.held
                self._reschedule(state)

    # questions -------------------------------------------------------------
    def take_due(self, now: float, runnable: set[str] | None = None) -> list[Start]:
        """Senses to start now, in config order; they are marked running.

        `runnable`, when given, replaces the held set: only those senses may start
        (the kernel keeps it current with `set_runnable` instead).
        """
        if runnable is not None:
            self._sync_runnable(runnable)
        self._release_debounces(now)
        due = []
        visits = self._visits
        while visits and visits[0][0] <= now:
            when, name = heapq.heappop(visits)
            state = self.states.get(name)
            if state is not None and state.visit_at == when:
                state.visit_at = None  # taken: a duplicate entry for the same time is now stale
                due.append(state)
        due.sort(key=lambda s: s.order)
        starts: list[Start] = []
        for state in due:
            self._visit(state, now, starts)
            self._reschedule(state)
        return starts

    def _visit(self, state: SenseState, now: float, starts: list[Start]) -> None:
        held_until = NOW  # a back-off or quarantine that ends now: the start was due at its end, not before
        if state.blocked_until is not None:
            if now < state.blocked_until:
                return
            held_until = state.blocked_until
            state.blocked_until, state.blocked_why, state.quarantined = None, None, False
        if state.last_complete is None and state.first_due is None and state.intervals:
            state.first_due = first_slot(state.name, state.interval or 0.0, now, self._timed)  # runnable: its slot
        wanted = state.wants_at()
        if wanted is None or wanted > now:
            return
        reason = state.pending_reason if state.pending else self._timer_reason(state, now)
        free = state.throttle_free()
        if free > now:
            if not state.pending:
                state.deferred += 1
                state.pending, state.pending_reason = True, reason
            return
        self._start(state, now)
        due = max(wanted, free, held_until)  # lateness is counted from here: a back-off is not lateness
        starts.append(Start(state.name, reason or INTERVAL, due if due != NOW else now))

    def _timer_reason(self, state: SenseState, now: float) -> Reason:
        return CRON if state.cron_next is not None and state.cron_next <= now else INTERVAL

    def _start(self, state: SenseState, now: float) -> None:
        state.running, state.pending, state.pending_reason = True, False, None
        state.last_start = now
        state.runs += 1
        if state.cron_next is not None and state.cron_next <= now:
            state.cron_next = self._next_cron(state, now)

    def _release_debounces(self, now: float) -> None:
        if now == NEVER:
            released = [(key, b.source) for key, b in self.debounces.items()]
            self.debounces, self._bursts = {}, []
        else:
            ripe = []
            bursts = self._bursts
            while bursts and bursts[0][0] <= now:
                fire_at, seq, key = heapq.heappop(bursts)
                burst = self.debounces.get(key)
                if burst is not None and burst.fire_at == fire_at and burst.seq == seq:
                    del self.debounces[key]
                    ripe.append((seq, key, burst.source))
            released = [(key, source) for _, key, source in sorted(ripe)]
        for (heard, index), source in released:
            listeners = self.listeners.get(heard, [])
            if index < len(listeners):
                self.trigger(listeners[index].sense, Reason.debounced(source or heard))

    def next_wakeup(self, runnable: set[str] | None = None) -> float | None:
        """The earliest time `take_due` could return something without a new event."""
        if runnable is not None:
            self._sync_runnable(runnable)
        wakes, bursts = self._wakes, self._bursts
        while wakes and self._stale_wake(wakes[0]):
            heapq.heappop(wakes)
        while bursts and self._stale_burst(bursts[0]):
            heapq.heappop(bursts)
        times = [heap[0][0] for heap in (wakes, bursts) if heap]
        return min(times) if times else None

    def _stale_wake(self, entry: tuple[float, str]) -> bool:
        state = self.states.get(entry[1])
        return state is None or state.wake_at != entry[0]

    def _stale_burst(self, entry: tuple[float, int, tuple[str, int]]) -> bool:
        burst = self.debounces.get(entry[2])
        return burst is None or burst.fire_at != entry[0] or burst.seq != entry[1]

    def next_due(self, sense: str) -> float | None:
        state = self.states.get(sense)
        return None if state is None or state.running else state.next_start()

    def pending_count(self) -> int:
        return sum(1 for s in self.states.values() if s.pending)

    # the heaps -------------------------------------------------------------
    def _reschedule(self, state: SenseState) -> None:
        """Bring this sense's heap keys up to date after any change to it."""
        if state.running or state.held or state.paused or self.states.get(state.name) is not state:
            visit = wake = None
        else:
            visit, wake = state.keys()
        if visit != state.visit_at:
            state.visit_at = visit
            if visit is not None:
                self._push(self._visits, (visit, state.name))
        if wake != state.wake_at:
            state.wake_at = wake
            if wake is not None:
                self._push(self._wakes, (wake, state.name))

    def _push(self, heap: list, entry: tuple) -> None:
        heapq.heappush(heap, entry)
        if len(heap) > 2 * len(self.states) + 64:  # mostly stale: rebuild from the live keys
            self._compact()

    def _compact(self) -> None:
        self._visits = [(s.visit_at, s.name) for s in self.states.values() if s.visit_at is not None]
        self._wakes = [(s.wake_at, s.name) for s in self.states.values() if s.wake_at is not None]
        self._bursts = [(b.fire_at, b.seq, key) for key, b in self.debounces.items()]
        heapq.heapify(self._visits)
        heapq.heapify(self._wakes)
        heapq.heapify(self._bursts)
