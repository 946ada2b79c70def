"""The reflex rules, on injected time: nothing here sleeps."""

from __future__ import annotations

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.scheduler import FIRST_SLOT, Scheduler, first_slot
from nerve_cli.vocab.reasons import DEMAND, Reason


def cfg(senses: dict, reflexes: list) -> NerveConfig:
    return NerveConfig.model_validate({"senses": senses, "reflexes": reflexes})


def names(starts) -> list[str]:
    return [s.sense for s in starts]


def test_interval_counts_from_last_completion_recorded_on_disk() -> None:
    c = cfg({"a": {}}, [{"sense": "a", "interval": "10s"}])
    s = Scheduler(c, {"a": 1000.0})
    assert s.take_due(1005.0) == []
    assert s.next_wakeup() == 1010.0
    assert names(s.take_due(1010.0)) == ["a"]


def test_overdue_after_restart_runs_once_without_backfill() -> None:
    c = cfg({"a": {}}, [{"sense": "a", "interval": "10s"}])
    s = Scheduler(c, {"a": 0.0})  # last completed long ago: 100 periods missed
    assert names(s.take_due(1000.0)) == ["a"]
    assert s.take_due(1000.0) == []  # running: no second start
    s.completed("a", 1000.5)
    assert s.take_due(1001.0) == []  # no back-fill of missed periods
    assert s.next_wakeup() == 1010.5  # rhythm resumes from the completion


def test_never_run_interval_sense_first_runs_at_its_slot() -> None:
    """A lone interval sense spreads over one 10 ms slot: it first runs at the next slot's start, at once."""
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1m"}]))
    slot = first_slot("a", 60.0, 5.003)
    assert 5.003 < slot < 5.003 + FIRST_SLOT and first_slot("a", 60.0, 5.0) == 5.0
    assert s.take_due(5.003) == []
    assert s.next_wakeup() == slot
    starts = s.take_due(slot)
    assert names(starts) == ["a"] and starts[0].due == slot  # lateness counts from the slot


def test_senses_that_never_ran_are_spread_over_their_interval_not_started_in_one_burst() -> None:
    """1,000 senses found runnable together would all run at once and, since an interval counts from the
    completion, stay in one burst every period: each first runs at its own place in the second."""
    n = 1000
    c = cfg({f"s{i}": {} for i in range(n)}, [{"sense": f"s{i}", "interval": "1s"} for i in range(n)])

    def first_runs(s: Scheduler) -> list[float]:
        now = {start.sense: 100.0 for start in s.take_due(100.0)}  # the first slot's: at once
        return [now.get(f"s{i}") or s.next_due(f"s{i}") or -1.0 for i in range(n)]

    slots = first_runs(Scheduler(c))
    assert 100.0 <= min(slots) and max(slots) < 101.0  # a millisecond each: the whole second
    assert len({round(t, 6) for t in slots}) == 100  # in 10 ms slots, about 10 senses each
    per_tenth = [sum(1 for t in slots if 100.0 + k / 10 <= t < 100.0 + (k + 1) / 10) for k in range(10)]
    assert min(per_tenth) >= 60 and max(per_tenth) <= 140, per_tenth  # about 100 in every tenth of the second
    assert first_runs(Scheduler(c)) == slots  # no randomness: the same slots in every process, on every start


def test_a_few_senses_that_never_ran_share_a_slot_and_its_wake_up() -> None:
    """20 senses spread over 20 ms (a millisecond each), in two 10 ms slots: not 20 wake-ups of the engine."""
    n = 20
    s = Scheduler(cfg({f"s{i}": {} for i in range(n)}, [{"sense": f"s{i}", "interval": "10s"} for i in range(n)]))
    at_once = {start.sense for start in s.take_due(50.0)}
    later = {s.next_due(f"s{i}") for i in range(n) if f"s{i}" not in at_once}
    assert at_once and len(later) <= 1 and all(50.0 < t < 50.02 for t in later), (at_once, later)


def test_a_short_interval_spreads_first_runs_over_the_interval_itself() -> None:
    n = 300  # 300 ms of spread asked for, 100 ms given: the interval
    s = Scheduler(cfg({f"s{i}": {} for i in range(n)}, [{"sense": f"s{i}", "interval": "100ms"} for i in range(n)]))
    at_once = {start.sense for start in s.take_due(7.0)}
    later = {s.next_due(f"s{i}") or 0.0 for i in range(n) if f"s{i}" not in at_once}
    assert at_once and all(7.0 < t < 7.1 for t in later) and len(later) == 9


def test_the_first_slot_counts_from_when_the_sense_is_runnable_not_from_the_engine_start() -> None:
    """Held while its worker starts: a slot counted from the scheduler's creation would have passed by the time
    every worker is ready, and every sense would run at once."""
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1s"}]), hold_new=True)
    assert s.take_due(10.0) == [] and s.next_wakeup() is None  # held: no slot yet
    s.set_runnable(["a"], True)
    assert s.take_due(30.004) == []
    assert s.next_due("a") == first_slot("a", 1.0, 30.004) and 30.004 < first_slot("a", 1.0, 30.004) < 30.02


def test_a_trigger_does_not_wait_for_the_first_slot_and_a_completion_on_disk_has_none() -> None:
    c = cfg({"a": {}}, [{"sense": "a", "interval": "1s"}])
    s = Scheduler(c)
    s.trigger("a", DEMAND)
    assert names(s.take_due(5.0)) == ["a"]
    restarted = Scheduler(c, {"a": 4.5})  # completed before a restart: due at completion + interval
    assert restarted.take_due(5.0) == [] and restarted.next_wakeup() == 5.5


def test_signal_triggers_listeners_only() -> None:
    c = cfg({"a": {}, "b": {}, "c": {}}, [{"sense": "b", "on": ["a"]}, {"sense": "c", "on": ["b"]}])
    s = Scheduler(c)
    assert s.take_due(1.0) == []
    assert s.next_wakeup() is None  # nothing to wait for: event-driven
    assert s.on_signal("a") == ["b"]
    starts = s.take_due(1.0)
    assert names(starts) == ["b"] and starts[0].reason == Reason.signal("a")


def test_triggers_during_a_compute_coalesce_into_exactly_one_pending_run() -> None:
    s = Scheduler(cfg({"a": {}, "b": {}}, [{"sense": "b", "on": ["a"]}]))
    s.on_signal("a")
    assert names(s.take_due(1.0)) == ["b"]
    for _ in range(50):
        s.on_signal("a")
    assert s.take_due(1.1) == []  # still running
    s.completed("b", 2.0)
    assert names(s.take_due(2.0)) == ["b"]  # exactly one more
    s.completed("b", 3.0)
    assert s.take_due(3.0) == []
    assert s.states["b"].coalesced == 49


def test_simultaneous_triggers_merge() -> None:
    s = Scheduler(cfg({"a": {}, "x": {}}, [{"sense": "x", "on": ["a", "chan"], "interval": "1s"}]))
    s.on_signal("a")
    s.on_signal("chan")
    assert names(s.take_due(10.0)) == ["x"]


def test_throttle_defers_and_never_drops() -> None:
    s = Scheduler(cfg({"a": {}, "b": {"throttle": "5s"}}, [{"sense": "b", "on": ["a"]}]))
    s.on_signal("a")
    assert names(s.take_due(100.0)) == ["b"]
    s.completed("b", 100.2)
    s.on_signal("a")  # inside the throttle window
    assert s.take_due(101.0) == []
    assert s.next_wakeup() == 105.0
    starts = s.take_due(105.0)
    assert names(starts) == ["b"] and starts[0].due == 105.0


def test_throttle_applies_to_intervals_too() -> None:
    s = Scheduler(cfg({"a": {"throttle": "10s"}}, [{"sense": "a", "interval": "1s"}]))
    started = first_slot("a", 1.0, 0.0)
    assert names(s.take_due(started)) == ["a"]
    s.completed("a", started + 0.1)
    assert s.take_due(started + 1.1) == []
    assert s.next_wakeup() == started + 10.0


def test_disabled_sense_and_reflex_do_nothing() -> None:
    c = cfg(
        {"a": {"enabled": False}, "b": {}, "c": {}},
        [{"sense": "a", "interval": "1s"}, {"sense": "b", "interval": "1s", "enabled": False}, {"sense": "c", "on": ["a"]}],
    )
    s = Scheduler(c)
    assert s.take_due(100.0) == []
    assert s.trigger("a", DEMAND) is False
    assert s.next_wakeup() is None


def test_on_demand_any_enabled_sense() -> None:
    s = Scheduler(cfg({"a": {}}, []))
    assert s.trigger("a", DEMAND)
    starts = s.take_due(1.0)
    assert names(starts) == ["a"] and starts[0].reason == DEMAND


def test_runnable_filter_holds_wanted_senses_until_their_worker_is_ready() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1s"}]))
    assert s.take_due(5.0, runnable=set()) == []
    assert names(s.take_due(5.0, runnable={"a"})) == ["a"]  # a lone sense's first slot is now


def test_shortest_interval_wins_when_two_reflexes_name_a_sense() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1m"}, {"sense": "a", "interval": "10s"}]), {"a": 0.0})
    assert s.next_wakeup() == 10.0


def test_config_change_keeps_runtime_state() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "10s"}]), {"a": 50.0})
    s.apply_config(cfg({"a": {}}, [{"sense": "a", "interval": "20s"}]))
    assert s.next_wakeup() == 70.0
