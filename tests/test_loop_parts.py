"""The loop's parts in process (kernel.loop): the pump, the router and the outcomes, with a stand-in supervisor.

Everything else is real (the scheduler, the ledger and log store on SQLite in tmp_path, the guards, delivery);
only a worker is replaced, by a supervisor that takes or refuses a compute and answers through the hooks as a
real one does. Each test runs its own event loop: the pump arms asyncio timers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.config.model import NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import EngineStats
from nerve_cli.kernel.loop.current import Current
from nerve_cli.kernel.loop.freshness import FreshnessWatch
from nerve_cli.kernel.loop.outcomes import Outcomes
from nerve_cli.kernel.loop.pump import Pump
from nerve_cli.kernel.loop.records import Computes
from nerve_cli.kernel.loop.router import Committed, Router
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.supervisor import Inflight
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab.logrows import LogKind, LogRow
from nerve_cli.vocab.reasons import DEMAND
from nerve_cli.vocab.sources import SourceKind
from nerve_cli.wire import protocol


@dataclass
class StandIn:
    """A group's supervisor without a worker: records what it is handed; `takes` False refuses."""

    senses: list[str]
    takes: bool = True
    handed: list[tuple[int, str]] = field(default_factory=list)
    inflight: dict[int, Inflight] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
    takers: set[str] = field(default_factory=set)

    def compute(self, compute_id: int, sense: str, reason: Any, sources: Any = None, filters: Any = None,
                bind: Any = None) -> bool:
        if self.takes:
            self.handed.append((compute_id, sense))
            self.inflight[compute_id] = Inflight(compute_id, sense, reason, time.time())
        return self.takes

    def runnable(self) -> set[str]:
        return set(self.senses) if self.takes else set()


class NoBuiltins:
    senses: frozenset[str] = frozenset()

    def compute(self, compute_id: int, sense: str, reason: Any) -> None:
        raise AssertionError("no built-in sense here")


class Heard:
    def __init__(self) -> None:
        self.items: list[Committed] = []

    def committed(self, item: Committed) -> None:
        self.items.append(item)


class Kit:
    """The loop's parts over one config, wired as the engine wires them."""

    def __init__(self, tmp: Path, config: dict) -> None:
        self.config = NerveConfig.model_validate(config)
        self.layout = Layout(tmp)
        self.layout.data.mkdir(parents=True, exist_ok=True)
        self.logs = LogStore(self.layout.logs_db)
        self.rows: list[LogRow] = []
        self.lines: list[tuple[str, str]] = []
        self.current = Current(self.config, [])
        self.scheduler = Scheduler(self.config)
        self.stats = EngineStats()
        self.ledger = Ledger(self.layout, self.logs, self.log)
        self.delivery = Delivery(self.layout.data, self.config, lambda s, r: self.outcomes.trigger(s, r),
                                 self.scheduler.starts)
        self.freshness = FreshnessWatch(Freshness(), self.layout.sense_db, self.log, self.report,
                                        lambda s, r: self.outcomes.trigger(s, r))
        self.router = Router(self.scheduler, self.ledger, self.delivery, self.freshness, self.stats, self.log,
                             self.report)
        self.groups = Groups(tmp, lambda: self.current.config)
        self.supervisor = StandIn(list(self.config.senses))
        self.groups.supervisors["default"] = self.supervisor  # type: ignore[assignment]
        self.computes, self.reads = Computes(), Reads()
        self.wakes = 0
        self.pump = Pump(self.scheduler, self.current, self.groups, NoBuiltins(), self.delivery, self.reads,
                         self.computes, self.stats, self.log, self.report, self._woken, started_at=time.time())
        self.guards = Guards(self.config.engine, self.scheduler, self.logs, self.log, self.report)

        async def no_peer(group: str, message: Any) -> None:
            return None

        self.outcomes = Outcomes(self.current, self.scheduler, self.router, self.pump, self.groups, NoBuiltins(),
                                 self.computes, self.reads, self.guards, self.delivery, self.ledger, self.logs,
                                 self.stats, self.log, self.report, self.layout, no_peer)  # type: ignore[arg-type]

    def _woken(self) -> None:
        self.wakes += 1

    def log(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None:
        self.rows.append(row)

    def report(self, level: str, line: str) -> None:
        self.lines.append((level, line))

    def kinds(self, sense: str | None = None) -> list[LogKind]:
        return [r.kind for r in self.rows if sense is None or r.ref == sense]

    def completes(self) -> list[dict]:
        return [r.payload for r in self.rows if r.kind is LogKind.RUN_COMPLETE]


PAIR = {"senses": {"a": {}, "b": {}}, "reflexes": [{"sense": "b", "on": ["a"]}]}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_pump_returns_a_start_no_worker_takes_and_finishes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, PAIR)
        kit.pump.on_wake = kit._woken  # the pump alone: nothing above it hears
        kit.supervisor.takes = False
        kit.scheduler.trigger("a", DEMAND)
        misses = kit.pump.run()
        assert [(m.sense, m.error.type, m.unavailable) for m in misses] == [("a", "WorkerUnavailable", True)]
        assert kit.kinds() == [LogKind.RUN_START]  # started, not finished: finishing is the caller's
        assert kit.computes.get(misses[0].id) is not None  # its record stays open for whoever finishes it
    run(main())


def test_the_pump_hands_a_due_start_over_and_its_timer_wakes_the_entry_point(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, {"senses": {"a": {}}, "reflexes": [{"sense": "a", "interval": "50ms"}]})
        kit.pump.on_wake = kit._woken

        async def woken(times: int) -> None:
            deadline = time.monotonic() + 5
            while kit.wakes < times and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert kit.wakes == times  # the timer calls the entry point it was given, nothing else

        assert kit.pump.run() == []  # a never ran: it first runs at its 10 ms slot (first_slot): now or soon
        if not kit.supervisor.handed:
            await woken(1)
            assert kit.pump.run() == []
        assert [s for _, s in kit.supervisor.handed] == ["a"]
        kit.scheduler.completed("a", time.time())
        wakes = kit.wakes
        kit.pump.run()  # arms the one timer for the next interval
        await woken(wakes + 1)
        kit.pump.stop()
        assert kit.pump.run() == [] and len(kit.supervisor.handed) == 1  # stopped: nothing more starts
    run(main())


def test_outcomes_end_a_start_the_pump_could_not_hand_over_and_answer_its_reader(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, PAIR)
        kit.supervisor.takes = False
        answer = kit.outcomes.demand("a")
        done = await asyncio.wait_for(answer, 5)
        assert done["outcome"] == "error" and done["error"]["type"] == "WorkerUnavailable"
        assert kit.kinds("a") == [LogKind.RUN_START, LogKind.ERROR, LogKind.RUN_COMPLETE]
        assert kit.outcomes.errors.by_sense["a"]["count"] == 1
        assert kit.computes.open == {}  # one record per compute, closed with it
    run(main())


def test_a_signal_is_routed_before_its_compute_ends_and_its_listener_starts_in_the_same_pump(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, PAIR)
        heard = Heard()
        kit.router.subscribe(heard)
        answer = kit.outcomes.demand("a")
        (compute_id, sense), = kit.supervisor.handed
        inflight = kit.supervisor.inflight.pop(compute_id)
        kit.outcomes.compute_output("default", protocol.Output(id=compute_id, sense="a", stream="stdout", text="hi"))
        kit.outcomes.compute_answered("default", inflight, protocol.Signal(
            id=compute_id, sense="a", payload={"v": 1}, ts=1, duration_ms=2.0, signal_id=7))
        assert [s for _, s in kit.supervisor.handed] == ["a", "b"]  # b heard a, and started at once
        assert [(i.kind, i.source, i.id, i.payload) for i in heard.items] == [(SourceKind.SENSE, "a", 7, {"v": 1})]
        done = await asyncio.wait_for(answer, 5)
        assert done["outcome"] == "signal" and done["signal_id"] == 7
        assert done["output"] == [{"stream": "stdout", "text": "hi"}] and done["error"] is None
        assert kit.kinds("a") == [LogKind.RUN_START, LogKind.OUTPUT, LogKind.RUN_COMPLETE]
    run(main())


def test_a_lost_compute_is_an_error_that_names_who_crashed_the_worker(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, PAIR)
        answer = kit.outcomes.demand("a")
        (compute_id, _), = kit.supervisor.handed
        inflight = kit.supervisor.inflight.pop(compute_id)
        kit.outcomes.compute_lost("default", inflight, "worker died (exit -9)", None)
        done = await asyncio.wait_for(answer, 5)
        assert done["outcome"] == "lost" and done["error"]["type"] == "WorkerDied"
        error = next(r.payload for r in kit.rows if r.kind is LogKind.ERROR)
        assert error["error_type"] == "WorkerDied" and error["compute_id"] == compute_id
        assert error["message"].startswith("compute lost: worker died")
    run(main())


def test_the_router_logs_an_event_once_wakes_its_listeners_and_tells_each_subscriber(tmp_path: Path) -> None:
    @dataclass
    class Event:
        id: int
        channel: str = "deploys"
        ts: int = 5
        origin: str | None = None
        via: str | None = None
        schema_version: str | None = None
        hash: str | None = None
        traceparent: str | None = None
        cause: object = None

    async def main() -> None:
        kit = Kit(tmp_path, {"senses": {"b": {}}, "reflexes": [{"sense": "b", "on": ["deploys"]}]})
        heard = Heard()
        kit.router.subscribe(heard)
        kit.ledger.start()
        woken = kit.router.events([(Event(1), {"x": 1}), (Event(2), {"x": 2})])
        assert woken == [["b"], ["b"]]
        assert kit.kinds("deploys") == [LogKind.EMIT, LogKind.EMIT]
        assert [(i.kind, i.id) for i in heard.items] == [(SourceKind.CHANNEL, 1), (SourceKind.CHANNEL, 2)]
        assert kit.supervisor.handed == []  # the router never starts a compute: its caller pumps
        assert kit.outcomes.emitted([(Event(2), {"x": 2})]) == [["b"]]
        assert kit.kinds("deploys") == [LogKind.EMIT, LogKind.EMIT]  # an event is logged once
        assert [s for _, s in kit.supervisor.handed] == ["b"]
    run(main())


def test_an_interval_counts_from_the_compute_s_end_in_its_worker_not_from_when_the_loop_read_it(tmp_path: Path) -> None:
    async def main() -> None:
        kit = Kit(tmp_path, {"senses": {"a": {}}, "reflexes": [{"sense": "a", "interval": "10s"}]})

        def answer(ended: float) -> None:
            kit.outcomes.demand("a")
            compute_id, _ = kit.supervisor.handed[-1]
            inflight = kit.supervisor.inflight.pop(compute_id)
            inflight.started -= 2.0  # sent two seconds ago
            kit.outcomes.compute_answered("default", inflight, protocol.Signal(
                id=compute_id, sense="a", payload=1, ts=int(ended * 1000), duration_ms=1.0, ended=ended))

        ended = time.time() - 0.5  # committed half a second before this loop got to its answer
        answer(ended)
        assert kit.scheduler.next_due("a") == ended + 10.0
        before = time.time()
        answer(0.0)  # a worker that does not say: counted from when its answer was read
        assert before + 10.0 <= (kit.scheduler.next_due("a") or 0.0) <= time.time() + 10.0
        before = time.time()
        answer(before + 60.0)  # never later than now (nor before it was sent)
        assert before + 10.0 <= (kit.scheduler.next_due("a") or 0.0) <= time.time() + 10.0
    run(main())
