"""The engine's parts, each run alone: handed what it needs, never an Engine.

Real scheduler, real logs.db, real child processes; only the engine around a
part is replaced by the few callbacks or attributes the part declares.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from loadclock import IdleClock

from nerve_cli.config.model import GroupConfig, NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.control import requests
from nerve_cli.kernel.control.health import health_payload
from nerve_cli.kernel.control.snapshot import SenseErrors, SenseView, Snapshot
from nerve_cli.kernel.core.listeners import ListenerHealth
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import EngineStats
from nerve_cli.kernel.reload import apply as reload
from nerve_cli.kernel.reload.watch import Changes
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.penalty import Blame
from nerve_cli.kernel.supervision.watchdog import Watchdog
from nerve_cli.kernel.workflows import admission, recovery
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.logs import LogStore, query_logs
from nerve_cli.store.quarantines import QUARANTINE
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.states import WorkerState


def config(senses: dict, reflexes: list, **rest: Any) -> NerveConfig:
    return NerveConfig.model_validate({"senses": senses, "reflexes": reflexes, **rest})


class Recorder:
    """The engine's `log` and `report` callbacks, kept in lists."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.lines: list[tuple[str, str]] = []

    def log(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None:
        self.rows.append((row.source, row.type, row.ref, row.payload))

    def report(self, level: str, message: str) -> None:
        self.lines.append((level, message))


def test_guards_quarantine_blocks_the_scheduler_and_survives_a_new_guards(tmp_path: Path) -> None:
    cfg = config({"a": {}}, [{"sense": "a", "interval": "10s"}], engine={"quarantine_after": 2})
    logs = LogStore(tmp_path / "logs.db")
    now = time.time()  # the quarantine's expiry is absolute: read back against the clock
    scheduler, out = Scheduler(cfg, now=now), Recorder()
    guards = Guards(cfg.engine, scheduler, logs, out.log, out.report)
    crash = Blame("a", "its code was on the crashing thread (senses/a/sense.py:3)")
    for at in (now, now + 1):  # its code killed its worker twice
        blame = guards.worker_died("g", frozenset({"a"}), crash, at, senses=["a"])
        guards.after_compute("a", Outcome.LOST, at, group="g", blame=blame)
    assert scheduler.states["a"].quarantined
    assert [r[1] for r in out.rows] == ["quarantined"]
    logs.flush()

    fresh = Scheduler(cfg, now=now + 2)  # an engine restart: the quarantine is read back from logs.db
    again = Guards(cfg.engine, fresh, logs, out.log, out.report)
    again.restore()
    assert fresh.states["a"].quarantined
    assert again.reset("a") is True and not fresh.states["a"].blocked_until
    logs.flush()
    assert logs.get_meta(QUARANTINE + "a") == "null"
    logs.close()


def test_health_payload_reads_only_what_it_is_given() -> None:
    scheduler = Scheduler(config({"a": {}}, [{"sense": "a", "interval": "10s"}]), now=0.0)
    errors = [{"sense": "a", "message": "boom", "ts": 10**15}]
    snapshot = Snapshot(home=Path("."), pid=0, started_at=0.0,
                        senses={"a": SenseView("a", "default", scheduler.states["a"], None, SenseErrors())},
                        workers={}, pending=0, log_rows_buffered=0, channels=[], warnings=[], enabled=frozenset(),
                        errors={}, recent_errors=errors, stats=EngineStats())
    payload = health_payload(snapshot)
    assert payload["senses"] == 1 and payload["workers"] == {}
    assert payload["errors_last_hour"] == 1 and payload["recent_errors"] == errors
    assert payload["kernel_rss_mb"] > 0


def test_watchdog_calls_its_breach_callback_for_a_real_worker_over_its_limit() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        worker = SimpleNamespace(alive=True, pid=child.pid)
        supervisors = {"g": SimpleNamespace(worker=worker, state=WorkerState.READY, inflight={}, owners={}, children={})}
        limits = {"g": GroupConfig(memory_limit="1MB")}  # any python process breaks it
        breaches: list[tuple[int, str]] = []
        dog = Watchdog(supervisors, lambda: limits, lambda g, pid, problem, blame: breaches.append((pid, problem)))
        clock = IdleClock(10)  # right after exec the child is still smaller than 1MB
        while not breaches and not clock.expired():
            dog.check(time.monotonic())
            time.sleep(0.02)
        assert breaches and breaches[0][0] == child.pid
        assert "over its limit of" in breaches[0][1]
    finally:
        child.kill()
        child.wait()


class FakeRunning:
    """What `requests.Target` and `reload.Target` declare, around real parts."""

    def __init__(self, home: Path, cfg: NerveConfig) -> None:
        self.home, self.layout, self.started_at, self.config = home, Layout(home), 0.0, cfg
        self.scheduler = Scheduler(cfg, now=0.0)
        self.warnings: list[str] = []
        self.workflows = None
        self.listener_health = ListenerHealth(home)
        self.out = Recorder()
        self.log, self.report = self.out.log, self.out.report
        self.started: list[tuple[str, list[str]]] = []
        self.processes = FakeProcesses(self.started)
        self.applied: list[str] = []
        self.pumps = 0

    # requests.Target
    def snapshot(self) -> Snapshot:
        return Snapshot(home=self.home, pid=0, started_at=self.started_at,
                        senses={name: self.sense(name) for name in self.scheduler.states},  # type: ignore[misc]
                        workers={}, pending=self.scheduler.pending_count(), log_rows_buffered=0, channels=[],
                        warnings=self.warnings, enabled=frozenset(self.config.enabled_senses()), errors={},
                        recent_errors=[], stats=EngineStats())

    def sense(self, name: str) -> SenseView | None:
        state = self.scheduler.states.get(name)
        return None if state is None else SenseView(name, "default", state, self.scheduler.next_due(name),
                                                    SenseErrors())

    def senses(self) -> list[str]:
        return list(self.scheduler.states)

    def reading(self, sense: str) -> None:
        return None

    def demand(self, sense: str) -> asyncio.Future:
        raise AssertionError("not reached in these tests")

    def emit(self, channel: str, payload: Any, key: str | None = None, via: str | None = None,
             traceparent: str | None = None, schema_version: Any = None, hashed: bool = False) -> asyncio.Future:
        from nerve_cli.kernel.core.emits import EmitDesk

        desk = EmitDesk(self.layout.events_db, lambda stored: [self.scheduler.on_signal(e.channel, 1.0) for e, *_ in stored])
        return desk.emit(channel, payload, key, via=via, schema_version=schema_version, hashed=hashed,
                         traceparent=traceparent)

    def events_stored(self, channel: str | None) -> int:
        return 0

    async def listener_backlogs(self) -> dict:
        return await self.listener_health.snapshot({})

    async def agent_backlogs(self) -> dict:
        return {}

    def replayed(self, sense: str) -> None:
        raise AssertionError("not reached in these tests")

    def pump(self) -> None:
        self.pumps += 1

    # reload.Target
    def use_config(self, cfg: NerveConfig) -> None:
        self.config = cfg
        self.applied.append("use_config")

    def config_applied(self) -> None:
        self.applied.append("config_applied")



class FakeProcesses:
    """The process manager as reload asks it, starting nothing."""

    def __init__(self, started: list[tuple[str, list[str]]]) -> None:
        self.started = started
        self.running: set[str] = set()

    async def regroup(self, old: NerveConfig, new: NerveConfig) -> set[str]:
        fresh = {g: s for g, s in new.sense_groups().items() if g not in self.running}
        self.started.extend(fresh.items())
        self.running |= set(fresh)
        return set(fresh)

    def get(self, group: str) -> None:
        return None

    async def restart(self, group: str) -> bool:
        return False


def test_requests_answer_from_the_target_alone(tmp_path: Path) -> None:
    cfg = config({"a": {}}, [{"sense": "a", "on": ["ping.me"]}])
    target = FakeRunning(tmp_path, cfg)

    async def ask(**request: Any) -> dict:
        return await requests.handle(target, request)

    assert asyncio.run(ask(op="ping"))["ok"]
    assert "unknown op" in asyncio.run(ask(op="nope"))["error"]
    assert asyncio.run(ask(op="emit", channel="ping.me"))["triggered"] == ["a"]
    status = asyncio.run(ask(op="status"))
    assert status["senses"]["a"]["state"] == "pending" and status["workflows"] == {}


def test_reload_applies_a_valid_config_and_keeps_the_old_one_for_a_broken_file(tmp_path: Path) -> None:
    (tmp_path / "senses" / "b").mkdir(parents=True)
    before = config({"a": {}}, [{"sense": "a", "interval": "10s"}])
    target = FakeRunning(tmp_path, before)
    (tmp_path / "nerve.yaml").write_text("senses:\n  a: {}\n  b: {group: other}\nreflexes:\n"
                                         "  - {sense: a, interval: 10s}\n  - {sense: b, interval: 10s}\n")
    asyncio.run(reload.apply_changes(target, Changes(config=True)))
    assert target.applied == ["use_config", "config_applied"]
    assert ("other", ["b"]) in target.started and target.pumps == 1
    assert [r[1] for r in target.out.rows] == ["config_reloaded"]

    (tmp_path / "nerve.yaml").write_text("senses: [not, a, mapping]\n")
    asyncio.run(reload.apply_changes(target, Changes(config=True)))
    assert target.applied == ["use_config", "config_applied"]  # nothing applied the second time
    assert target.out.rows[-1][1] == "config_rejected"


def test_admission_starts_queues_and_drops_by_the_workflow_settings(tmp_path: Path) -> None:
    cfg = config({}, [], workflows={"w": {"concurrency": 1, "overflow": "queue", "max_queue": 1}})
    logs = LogStore(tmp_path / "logs.db")
    journal, kind = Journal(logs, lambda level, line: None), Kind("w")
    threads = [Thread(f"run-{i}", "w", "p", 3, {}) for i in range(3)]
    assert admission.admit(journal, kind, cfg.workflows["w"], threads[0], holding=False) == admission.STARTED
    kind.running[threads[0].run_id] = threads[0]
    assert admission.admit(journal, kind, cfg.workflows["w"], threads[1], holding=False) == admission.QUEUED
    assert admission.admit(journal, kind, cfg.workflows["w"], threads[2], holding=False) == admission.QUEUED
    logs.flush()
    assert [t.run_id for t in kind.queue] == ["run-2"]  # max_queue 1: the oldest request made room
    assert [r["type"] for r in query_logs(logs.path, source="workflow", ref="run-1")] == ["dropped"]
    assert admission.next_queued(kind, cfg.workflows["w"], holding=False) is None  # no room yet
    del kind.running["run-0"]
    assert admission.next_queued(kind, cfg.workflows["w"], holding=True) is None  # stopping: hold
    assert admission.next_queued(kind, cfg.workflows["w"], holding=False) is threads[2]
    with pytest.raises(Exception, match="unknown workflow 'x'"):
        admission.check_request(cfg, "x", "p", None)
    logs.close()


def test_recovery_crashes_or_resumes_threads_of_a_lost_worker(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs.db")
    lines: list[tuple[str, str]] = []
    journal = Journal(logs, lambda level, line: lines.append((level, line)))
    kind = Kind("w")
    kind.running = {"run-1": Thread("run-1", "w", "p", 3, {}, dispatched=True)}
    recovery.lose_threads(journal, kind, "worker exited with signal 9", resume=True)
    assert "run-1" in kind.running and not kind.running["run-1"].dispatched
    recovery.lose_threads(journal, kind, "worker exited with signal 9", resume=False)
    assert "run-1" in kind.running  # never handed to the worker that went away: it waits for the next one
    kind.running["run-1"].dispatched = True  # handed to the next worker, which is lost too
    recovery.lose_threads(journal, kind, "worker exited with signal 9", resume=False)
    assert not kind.running
    logs.flush()
    rows = query_logs(logs.path, source="workflow", ref="run-1")
    assert [r["type"] for r in rows] == ["started", "crashed"]
    assert json.dumps(rows[-1]["payload"]).count("signal 9") == 1
    assert [level for level, _ in lines] == ["warn", "error"]
    logs.close()


def test_a_thread_counts_its_rounds_once_per_message_and_again_for_a_new_chain() -> None:
    from nerve_cli.kernel.workflows.kind import Thread

    thread = Thread("run-1", "w", "go", 10, {})
    thread.messages.append({"role": "__start__"})
    assert thread.rounds == 0
    for role in ("ping", "pong", "__person__", "ping"):  # a person's answer is not a round
        thread.messages.append({"role": role})
    assert thread.rounds == 3
    thread.messages = [{"role": "__start__"}, {"role": "ping"}]  # a resume replaces the chain whole
    assert thread.rounds == 1


def test_the_emits_of_one_loop_pass_are_one_commit_in_order_and_a_later_pass_is_the_next(tmp_path: Path) -> None:
    from nerve_cli.kernel.core.emits import EmitDesk
    from nerve_cli.store.events import events_after

    routed: list[list[str]] = []

    def on_stored(stored: list) -> list[list[str]]:
        routed.append([event.channel for event, _ in stored])
        return [[] for _ in stored]

    async def run() -> tuple[list, int, int]:
        desk = EmitDesk(tmp_path / "events.db", on_stored)
        await desk.emit("warm.up", {})  # the first emit opens the database in the writer thread
        before = desk.commits
        # three callers in one loop pass: a socket batch, then two single emits
        futures = [*desk.emit_many([("a.one", {"n": 1}, None, None), ("a.two", {"n": 2}, None, None)]),
                   desk.emit("a.three", {"n": 3}), desk.emit("a.four", {"n": 4})]
        assert not any(f.done() for f in futures)  # nothing is acknowledged before its commit
        answers = await asyncio.gather(*futures)
        one_pass = desk.commits - before
        await desk.emit("b.later", {})
        later = desk.commits - before - one_pass
        await desk.close()
        return answers, one_pass, later

    answers, one_pass, later = asyncio.run(run())
    assert one_pass == 1 and later == 1
    assert [event.channel for event, _ in answers] == ["a.one", "a.two", "a.three", "a.four"]
    assert routed[1:] == [["a.one", "a.two", "a.three", "a.four"], ["b.later"]]
    ids = [event.id for event, _ in answers]
    assert ids == sorted(ids)
    assert [row["channel"] for row in events_after(tmp_path / "events.db", 0)] == [
        "warm.up", "a.one", "a.two", "a.three", "a.four", "b.later"]


def test_an_emit_queued_for_the_end_of_the_pass_is_committed_by_close(tmp_path: Path) -> None:
    from nerve_cli.kernel.core.emits import EmitDesk
    from nerve_cli.store.events import events_after

    async def run() -> asyncio.Future:
        desk = EmitDesk(tmp_path / "events.db", lambda stored: [[] for _ in stored])
        await desk.emit("warm.up", {})
        future = desk.emit("last.one", {"n": 1})
        await desk.close()  # before the loop pass that would have committed it
        return future

    future = asyncio.run(run())
    assert future.done() and future.result()[0].channel == "last.one"
    assert [row["channel"] for row in events_after(tmp_path / "events.db", 0)] == ["warm.up", "last.one"]
