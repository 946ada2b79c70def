"""The heap scheduler against the plain-scan reference: random event sequences, identical starts and state.

Each example draws a few configs (senses with throttles; reflexes with
intervals, jitter, cron, `on:` sources, debounce and max_wait), start-up
completions, and a sequence of events: time passing (also straight to the
next wake-up), signals, demands, completions, penalties and quarantines,
workers becoming (un)ready, reloads. The real scheduler hears about
readiness incrementally (`set_runnable`, `hold_new`), the reference gets the
whole runnable set on every call, as the kernel used to pass it.
"""

from __future__ import annotations

import random
from typing import Any

import reference_scheduler as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.vocab.reasons import DEMAND, Reason

NAMES = ["a", "b", "c"]
SOURCES = [*NAMES, "ch", "nerve-health"]
T0 = 1_750_000_000.0  # a real epoch: cron needs a calendar
FIELDS = ("running", "pending", "pending_reason", "last_start", "last_complete", "cron_next", "jitter_offset",
          "blocked_until", "blocked_why", "quarantined", "runs", "coalesced", "deferred", "debounced", "skipped",
          "throttle", "intervals", "crons")


@st.composite
def reflexes(draw: Any) -> dict:
    reflex: dict[str, Any] = {"sense": draw(st.sampled_from(NAMES))}
    interval = draw(st.sampled_from([None, "1s", "1500ms", "3s", "10s"]))
    if interval is not None:
        reflex["interval"] = interval
        if draw(st.booleans()):
            reflex["jitter"] = draw(st.sampled_from(["250ms", "500ms"]))
    if draw(st.integers(0, 9)) == 0:
        reflex["cron"] = draw(st.sampled_from(["* * * * *", "*/2 * * * *"]))
        if draw(st.booleans()):
            reflex["timezone"] = "UTC"
    on = draw(st.lists(st.sampled_from(SOURCES), max_size=3, unique=True))
    if on:
        reflex["on"] = on
        if draw(st.booleans()):
            reflex["debounce"] = draw(st.sampled_from(["500ms", "2s"]))
            if draw(st.booleans()):
                reflex["max_wait"] = draw(st.sampled_from(["2s", "5s"]))
    if draw(st.integers(0, 9)) == 0:
        reflex["enabled"] = False
    return reflex


@st.composite
def configs(draw: Any) -> NerveConfig:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    senses = {}
    for name in names:
        sense: dict[str, Any] = {}
        throttle = draw(st.sampled_from([None, "500ms", "1s", "2500ms"]))
        if throttle:
            sense["throttle"] = throttle
        if draw(st.integers(0, 7)) == 0:
            sense["enabled"] = False
        senses[name] = sense
    found = [r for r in draw(st.lists(reflexes(), min_size=1, max_size=6)) if r["sense"] in senses]
    return NerveConfig.model_validate({"senses": senses, "reflexes": found})


EVENTS = st.one_of(
    st.tuples(st.just("advance"), st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.5, 7.0, 61.0])),
    st.tuples(st.just("advance"), st.sampled_from([0.25, 0.5, 1.0])),
    st.tuples(st.just("wake")),
    st.tuples(st.just("take")),
    st.tuples(st.just("take")),
    st.tuples(st.just("signal"), st.sampled_from(SOURCES)),
    st.tuples(st.just("demand"), st.sampled_from([*NAMES, "nerve-health", "zz"])),
    st.tuples(st.just("complete"), st.integers(0, 4)),
    st.tuples(st.just("complete"), st.integers(0, 4)),
    st.tuples(st.just("block"), st.sampled_from(NAMES), st.sampled_from([0.5, 3.0, 30.0]), st.booleans()),
    st.tuples(st.just("unblock"), st.sampled_from(NAMES)),
    st.tuples(st.just("ready"), st.sampled_from([*NAMES, "nerve-health"]), st.booleans()),
    st.tuples(st.just("config"), st.integers(0, 2)),
)


def snapshot(s: Any) -> dict:
    states = {n: tuple(getattr(st_, f) for f in FIELDS) for n, st_ in s.states.items()}
    bursts = [(k, b.first, b.fire_at) for k, b in s.debounces.items()]
    return {"order": list(s.states), "states": states, "bursts": bursts,
            "due": {n: s.next_due(n) for n in s.states}, "pending": s.pending_count()}


def starts(found: list) -> list[tuple]:
    return [(x.sense, x.reason, x.due) for x in found]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfgs=st.lists(configs(), min_size=1, max_size=3), events=st.lists(st.tuples(EVENTS, st.booleans()), min_size=20, max_size=80),
       extra=st.booleans(), hold_new=st.booleans(), seed=st.integers(0, 2**16),
       completions=st.dictionaries(st.sampled_from(NAMES), st.sampled_from([5.0, 59.0, 3600.0])))
def test_same_starts_and_state_as_the_reference(cfgs: list[NerveConfig], events: list[tuple], extra: bool,
                                                hold_new: bool, seed: int, completions: dict[str, float]) -> None:
    now = T0
    extras = {"nerve-health": 5.0} if extra else None
    done = {name: T0 - ago for name, ago in completions.items()}
    old = ref.Scheduler(cfgs[0], done, extras, now=now, rng=random.Random(seed))
    new = Scheduler(cfgs[0], done, extras, now=now, rng=random.Random(seed), hold_new=hold_new)
    held: set[str] = {n for n in new.states if hold_new and n != "nerve-health"}

    def runnable() -> set[str]:
        return set(old.states) - held

    for event, pump in events:  # the kernel pumps after most events; sometimes several arrive together
        kind = event[0]
        if kind == "advance":
            now += event[1]
        elif kind == "wake":
            wake = old.next_wakeup(runnable())
            assert new.next_wakeup() == wake
            if wake is not None and wake > now:
                now = wake
        elif kind == "take":
            assert starts(new.take_due(now)) == starts(old.take_due(now, runnable()))
        elif kind == "signal":
            assert new.on_signal(event[1], now) == old.on_signal(event[1], now)
        elif kind == "demand":
            assert new.trigger(event[1], DEMAND) == old.trigger(event[1], DEMAND)
        elif kind == "complete":
            running = sorted(n for n, s in old.states.items() if s.running)
            if running:
                name = running[event[1] % len(running)]
                old.completed(name, now)
                new.completed(name, now)
        elif kind == "block":
            _, name, for_s, quarantine = event
            old.block(name, now + for_s, "failing", quarantine=quarantine)
            new.block(name, now + for_s, "failing", quarantine=quarantine)
        elif kind == "unblock":
            old.unblock(event[1])
            new.unblock(event[1])
        elif kind == "ready":
            _, name, ready = event
            new.set_runnable([name], ready)
            if name in new.states:
                (held.discard if ready else held.add)(name)
        elif kind == "config":
            cfg = cfgs[event[1] % len(cfgs)]
            before = set(old.states)
            old.apply_config(cfg, done, now=now)
            new.apply_config(cfg, done, now=now)
            held &= set(old.states)
            if hold_new:
                held |= {n for n in old.states if n not in before and n != "nerve-health"}
        if pump:
            assert starts(new.take_due(now)) == starts(old.take_due(now, runnable())), f"pump after {event}"
        assert snapshot(new) == snapshot(old), f"after {event} at {now - T0:g}s"
        assert new.next_wakeup() == old.next_wakeup(runnable()), f"after {event} at {now - T0:g}s"


def test_held_senses_keep_their_triggers_until_released() -> None:
    c = NerveConfig.model_validate({"senses": {"a": {}, "b": {}}, "reflexes": [{"sense": "b", "on": ["a"]}]})
    s = Scheduler(c, hold_new=True)
    s.on_signal("a", 1.0)
    s.trigger("a", DEMAND)
    assert s.take_due(1.0) == [] and s.next_wakeup() is None  # nobody can run: nothing to wake for
    s.set_runnable(["b"], True)
    assert [x.sense for x in s.take_due(2.0)] == ["b"]
    s.set_runnable(["a"], True)
    assert [(x.sense, x.reason) for x in s.take_due(3.0)] == [("a", DEMAND)]


def test_stale_heap_entries_stay_bounded_by_the_number_of_senses() -> None:
    names = [f"s{i}" for i in range(50)]
    c = NerveConfig.model_validate({
        "senses": {n: {} for n in names},
        "reflexes": [{"sense": n, "interval": "1h", "on": ["tick"]} for n in names]})
    s = Scheduler(c, {n: 0.0 for n in names})
    t = 100.0
    for _ in range(200):  # every round re-keys every sense: its interval counts from the new completion
        s.on_signal("tick", t)
        for start in s.take_due(t):
            s.completed(start.sense, t + 0.001)
        t += 1.0
    assert len(s._visits) <= 2 * len(names) + 64 and len(s._wakes) <= 2 * len(names) + 64
    assert s.next_wakeup() == t - 1.0 + 0.001 + 3600


def test_bursts_released_together_trigger_in_the_order_they_began() -> None:
    c = NerveConfig.model_validate({"senses": {"a": {}, "x": {}}, "reflexes": [
        {"sense": "x", "on": ["a"], "debounce": "2s"}, {"sense": "x", "on": ["ch"], "debounce": "500ms"}]})
    for s in (Scheduler(c), ref.Scheduler(c)):
        s.on_signal("a", 0.0)  # fires at 2.0
        s.on_signal("ch", 1.0)  # began later, fires earlier (1.5)
        assert [(x.sense, x.reason) for x in s.take_due(2.5)] == [("x", Reason.debounced("a"))]
