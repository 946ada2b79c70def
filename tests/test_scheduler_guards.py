"""Cron, debounce, jitter and blocks, on injected time."""

from __future__ import annotations

import random
import statistics
from datetime import datetime
from zoneinfo import ZoneInfo

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.core.cron import next_fire
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.vocab.reasons import CRON, DEMAND

BERLIN = ZoneInfo("Europe/Berlin")


def cfg(senses: dict, reflexes: list) -> NerveConfig:
    return NerveConfig.model_validate({"senses": senses, "reflexes": reflexes})


def ts(*args: int, tz=BERLIN) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def local(t: float) -> str:
    return datetime.fromtimestamp(t, BERLIN).strftime("%Y-%m-%d %H:%M %Z")


def test_cron_fire_times_across_spring_forward_in_a_named_timezone() -> None:
    t = ts(2026, 3, 28, 12, 0)
    fires = []
    for _ in range(3):
        t = next_fire("30 2 * * *", "Europe/Berlin", t)
        fires.append(local(t))
    # 02:30 does not exist on 29 March (clocks jump 02:00 → 03:00): cron runs it at 03:00 that day
    assert fires == ["2026-03-29 03:00 CEST", "2026-03-30 02:30 CEST", "2026-03-31 02:30 CEST"]


def test_cron_fire_times_across_fall_back_fire_once() -> None:
    t = ts(2026, 10, 24, 12, 0)
    fires = []
    for _ in range(3):
        t = next_fire("30 2 * * *", "Europe/Berlin", t)
        fires.append(local(t))
    assert fires == ["2026-10-25 02:30 CEST", "2026-10-26 02:30 CET", "2026-10-27 02:30 CET"]
    weekday = next_fire("0 9 * * 1-5", "Europe/Berlin", ts(2026, 10, 23, 12, 0))  # a Friday
    assert local(weekday) == "2026-10-26 09:00 CET"


def test_cron_reflex_fires_at_its_times_and_a_missed_fire_runs_once() -> None:
    c = cfg({"a": {}}, [{"sense": "a", "cron": "0 9 * * *", "timezone": "Europe/Berlin"}])
    start = ts(2026, 6, 1, 8, 0)
    s = Scheduler(c, now=start)
    assert s.take_due(start) == []
    assert s.next_wakeup() == ts(2026, 6, 1, 9, 0)
    starts = s.take_due(ts(2026, 6, 1, 9, 0))
    assert [x.sense for x in starts] == ["a"] and starts[0].reason == CRON
    s.completed("a", ts(2026, 6, 1, 9, 0, 1))
    assert s.next_wakeup() == ts(2026, 6, 2, 9, 0)
    # engine down for three days: last completion on disk is 1 June; on 4 June at noon it runs once
    s = Scheduler(c, {"a": ts(2026, 6, 1, 9, 0, 1)}, now=ts(2026, 6, 4, 12, 0))
    assert len(s.take_due(ts(2026, 6, 4, 12, 0))) == 1
    s.completed("a", ts(2026, 6, 4, 12, 0, 1))
    assert s.take_due(ts(2026, 6, 4, 12, 0, 2)) == []
    assert s.next_wakeup() == ts(2026, 6, 5, 9, 0)


def test_debounce_turns_a_burst_into_one_compute_after_the_quiet_period() -> None:
    c = cfg({"a": {}, "b": {}}, [{"sense": "b", "on": ["a"], "debounce": "2s"}])
    s = Scheduler(c)
    for t in (100.0, 100.5, 101.0, 101.5):
        s.on_signal("a", t)
        assert s.take_due(t) == []
    assert s.next_wakeup() == 103.5  # 2s after the last trigger
    assert s.take_due(103.4) == []
    starts = s.take_due(103.5)
    assert [x.sense for x in starts] == ["b"]
    assert s.states["b"].debounced == 3


def test_debounce_never_waits_longer_than_max_wait() -> None:
    c = cfg({"a": {}, "b": {}}, [{"sense": "b", "on": ["a"], "debounce": "2s", "max_wait": "5s"}])
    s = Scheduler(c)
    fired = []
    t = 100.0
    while t < 112.0:  # a trigger every second: the quiet period never comes
        s.on_signal("a", t)
        for start in s.take_due(t):
            fired.append(t)
            s.completed(start.sense, t)
        t += 1.0
    assert fired[:2] == [105.0, 111.0]  # max_wait after each burst's first trigger


def test_jitter_spreads_starts_and_keeps_the_mean_period() -> None:
    c = cfg({"a": {}}, [{"sense": "a", "interval": "10s", "jitter": "3s"}])
    s = Scheduler(c, {"a": 0.0}, rng=random.Random(7))
    gaps, last, t = [], 0.0, 0.0
    for _ in range(2000):
        t = s.next_wakeup()
        assert s.take_due(t)
        s.completed("a", t)
        gaps.append(t - last)
        last = t
    gaps = gaps[1:]
    assert abs(statistics.mean(gaps) - 10.0) < 0.15
    assert min(gaps) >= 7.0 and max(gaps) <= 13.0 and statistics.pstdev(gaps) > 1.0


def test_a_penalised_sense_waits_and_keeps_its_trigger() -> None:
    s = Scheduler(cfg({"a": {}}, []))
    s.block("a", 50.0, "failed 3 times in a row")
    s.trigger("a", DEMAND)
    assert s.take_due(10.0) == [] and s.next_wakeup() == 50.0
    assert [x.sense for x in s.take_due(50.0)] == ["a"]


def test_a_quarantined_sense_skips_triggers_and_counts_them() -> None:
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1s"}]), {"a": 0.0})
    s.block("a", 100.0, "worker killed 3 times", quarantine=True)
    for _ in range(4):
        s.trigger("a", DEMAND)
    assert s.take_due(50.0) == []
    assert s.states["a"].skipped == 4
    assert s.next_wakeup() == 100.0
    assert [x.sense for x in s.take_due(100.0)] == ["a"]  # the interval resumes after expiry
    assert not s.states["a"].quarantined



def test_a_start_after_a_back_off_is_due_when_the_back_off_ends_so_lateness_is_not_the_back_off() -> None:
    """nerve_interval_lateness_seconds counted back-off as lateness: a dashboard's p99 read 60 s, all from one
    failing sense's back-off."""
    s = Scheduler(cfg({"a": {}}, [{"sense": "a", "interval": "1s"}]), {"a": 100.0}, now=100.0)
    assert [x.sense for x in s.take_due(101.0)] == ["a"]
    s.completed("a", 101.0)
    s.block("a", 160.0, "failed 3 times in a row; backing off 1m")
    assert s.take_due(159.0) == []
    started = s.take_due(160.5)
    assert [(x.sense, x.due) for x in started] == [("a", 160.0)]  # due at the back-off's end, not at 102
