"""The reflex rules, on injected time: nothing here sleeps."""

from __future__ import annotations

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.scheduler import Scheduler
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


def test_never_run_interval_sense_is_due_now() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1m"}]))
    assert names(s.take_due(5.0)) == ["a"]


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
    assert names(s.take_due(0.0)) == ["a"]
    s.completed("a", 0.1)
    assert s.take_due(1.1) == []
    assert s.next_wakeup() == 10.0


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
    assert names(s.take_due(5.0, runnable={"a"})) == ["a"]


def test_shortest_interval_wins_when_two_reflexes_name_a_sense() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1m"}, {"sense": "a", "interval": "10s"}]), {"a": 0.0})
    assert s.next_wakeup() == 10.0


def test_config_change_keeps_runtime_state() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "10s"}]), {"a": 50.0})
    s.apply_config(cfg({"a": {}}, [{"sense": "a", "interval": "20s"}]))
    assert s.next_wakeup() == 70.0
