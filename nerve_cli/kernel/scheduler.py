"""The reflex rules of RFC-001 §4.2 as pure logic: time is passed in, nothing sleeps.

The engine feeds it events (a signal, a demand, a completion) and asks two
questions: which senses start now (`take_due`), and when is the next moment
anything could become due (`next_wakeup`). The rules:

- interval: due at last *completed* compute + interval; the completion time
  comes from disk at start-up, so an overdue sense runs once after a restart
  and then keeps its rhythm (no back-fill);
- on signal: a signal from a source marks its listeners wanted;
- coalescing: one compute per sense at a time; any number of triggers while it
  runs (or while it waits) become exactly one pending run;
- throttle: never two starts closer than `throttle`; a trigger inside the
  window waits for the window's end, it is not dropped;
- disabled senses and reflexes do nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nerve_cli.config.model import NerveConfig


@dataclass
class SenseState:
    name: str
    throttle: float = 0.0
    intervals: list[float] = field(default_factory=list)
    last_start: float | None = None
    last_complete: float | None = None
    running: bool = False
    pending: bool = False
    pending_reason: str | None = None
    runs: int = 0
    coalesced: int = 0
    deferred: int = 0

    @property
    def interval(self) -> float | None:
        return min(self.intervals) if self.intervals else None

    def interval_due(self) -> float | None:
        """When the interval next wants a compute (None: no interval reflex)."""
        if self.interval is None:
            return None
        if self.last_complete is None:
            return float("-inf")  # never ran: due now
        return self.last_complete + self.interval

    def throttle_free(self) -> float:
        """The earliest start the throttle allows."""
        if self.last_start is None or self.throttle <= 0:
            return float("-inf")
        return self.last_start + self.throttle


@dataclass(frozen=True)
class Start:
    sense: str
    reason: str
    due: float  # when it wanted to start (for lateness)


class Scheduler:
    """Decides what runs when. Holds no clock: every method takes `now` (epoch seconds)."""

    def __init__(self, config: NerveConfig, last_completions: dict[str, float] | None = None,
                 extra_senses: dict[str, float] | None = None) -> None:
        self.states: dict[str, SenseState] = {}
        self.listeners: dict[str, list[str]] = {}
        self._extra = dict(extra_senses or {})
        self.apply_config(config, last_completions or {})

    # configuration ---------------------------------------------------------
    def apply_config(self, config: NerveConfig, last_completions: dict[str, float] | None = None) -> None:
        """(Re)build triggers from config, keeping the runtime state of senses that stay."""
        old = self.states
        completions = last_completions or {}
        self.states = {}
        for name, sense in config.enabled_senses().items():
            state = old.get(name) or SenseState(name, last_complete=completions.get(name))
            state.throttle, state.intervals = sense.throttle, []
            self.states[name] = state
        for name, interval in self._extra.items():
            state = old.get(name) or SenseState(name, last_complete=completions.get(name))
            state.intervals = [interval]
            self.states[name] = state
        self.listeners = {}
        for reflex in config.active_reflexes():
            state = self.states[reflex.sense]
            if reflex.interval is not None:
                state.intervals.append(reflex.interval)
            for source in reflex.on:
                targets = self.listeners.setdefault(source, [])
                if reflex.sense not in targets:
                    targets.append(reflex.sense)

    # events ----------------------------------------------------------------
    def trigger(self, sense: str, reason: str) -> bool:
        """Want one compute of `sense`. False if the sense is unknown or disabled."""
        state = self.states.get(sense)
        if state is None:
            return False
        if state.pending:
            state.coalesced += 1  # merged into the run already waiting
        else:
            state.pending, state.pending_reason = True, reason
        return True

    def on_signal(self, source: str) -> list[str]:
        """A signal from a sense or an external channel: its listeners want a compute."""
        targets = self.listeners.get(source, [])
        for target in targets:
            self.trigger(target, f"on {source}")
        return targets

    def completed(self, sense: str, now: float) -> None:
        """A compute ended (any outcome, or its worker died). Pending triggers stay pending."""
        state = self.states.get(sense)
        if state is None:
            return
        state.running = False
        state.last_complete = now

    # questions -------------------------------------------------------------
    def take_due(self, now: float, runnable: set[str] | None = None) -> list[Start]:
        """Senses to start now; they are marked running. `runnable` limits to senses whose worker is ready."""
        starts = []
        for state in self.states.values():
            if state.running or (runnable is not None and state.name not in runnable):
                continue
            wanted = self._wanted_since(state, now)
            if wanted is None:
                continue
            free = state.throttle_free()
            if free > now:
                if not state.pending:
                    state.deferred += 1
                    state.pending, state.pending_reason = True, "interval"
                continue
            reason = state.pending_reason if state.pending else "interval"
            state.running, state.pending, state.pending_reason = True, False, None
            state.last_start = now
            state.runs += 1
            due = max(wanted, free)
            starts.append(Start(state.name, reason or "interval", due if due != float("-inf") else now))
        return starts

    def next_wakeup(self, runnable: set[str] | None = None) -> float | None:
        """The earliest time `take_due` could return something without a new event."""
        times = []
        for state in self.states.values():
            if state.running or (runnable is not None and state.name not in runnable):
                continue
            wants = [t for t in (state.interval_due(),) if t is not None]
            if state.pending:
                wants.append(float("-inf"))
            if wants:
                times.append(max(min(wants), state.throttle_free()))
        return min(times) if times else None

    def next_due(self, sense: str) -> float | None:
        state = self.states.get(sense)
        if state is None or state.running:
            return None
        wants = [t for t in (state.interval_due(),) if t is not None]
        if state.pending:
            wants.append(float("-inf"))
        return max(min(wants), state.throttle_free()) if wants else None

    def pending_count(self) -> int:
        return sum(1 for s in self.states.values() if s.pending)

    def _wanted_since(self, state: SenseState, now: float) -> float | None:
        """When the sense started wanting a compute, if it wants one at `now`."""
        if state.pending:
            return float("-inf")
        due = state.interval_due()
        if due is not None and due <= now:
            return due
        return None
