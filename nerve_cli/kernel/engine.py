"""The kernel: one asyncio process that never imports user code.

The engine builds the loop's parts in order (`kernel.loop`: the log writer,
the router, the pump, the outcomes, the built-in senses; the process manager
`supervision.groups`; the workflow manager; the edges) into one
`AsyncExitStack`, each registering its own teardown as it starts, runs until
asked to stop, and unwinds them in reverse. Every decision is event-driven:
a signal reaching a listener starts its compute in the same loop iteration;
the only timer is the pump's, armed for the scheduler's next wake-up.

The parts never import the engine: each is handed what it needs, or drives the
loop through a small Protocol it declares (`supervisor.GroupHooks`,
`reload.Target`, `requests.Target`), which `kernel.loop.desk` answers.

Events are durable, the bus is not: a signal is committed in its sense's
database and an emit in data/events.db before any listener is woken, and a
listener reads its events from those files (`kernel.core.delivery`,
`worker.events`), so nothing is lost with the bus. The ledger
(`kernel.core.ledger`) writes the log rows a killed kernel still owed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nerve_cli import eventloop
from nerve_cli.address import ListenAddress
from nerve_cli.config.load import load_config_and_warnings
from nerve_cli.config.model import BUILTIN_SENSES, THREADS_SENSE
from nerve_cli.home import Layout
from nerve_cli.kernel.control import requests
from nerve_cli.kernel.control.health import HEALTH_SENSE, HealthStore, health_payload
from nerve_cli.kernel.control.server import ControlServer
from nerve_cli.kernel.control.threads_sense import ThreadsStore
from nerve_cli.kernel.core.archive_job import archive_daily
from nerve_cli.kernel.core.causes import Causes
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import SIGNAL_MARK, SUCCESS_MARK, EngineStats
from nerve_cli.kernel.ingress.console import start_console
from nerve_cli.kernel.loop import edges
from nerve_cli.kernel.loop.builtins import Builtins
from nerve_cli.kernel.loop.current import Current
from nerve_cli.kernel.loop.deliveries import CodexDeliveries
from nerve_cli.kernel.loop.desk import Desk
from nerve_cli.kernel.loop.freshness import FreshnessWatch
from nerve_cli.kernel.loop.logwriter import LogWriter
from nerve_cli.kernel.loop.outcomes import Outcomes
from nerve_cli.kernel.loop.pump import Pump
from nerve_cli.kernel.loop.records import Computes
from nerve_cli.kernel.loop.router import Router
from nerve_cli.kernel.notify.edge import make_notifier
from nerve_cli.kernel.reload import apply as reload
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.launch import PLAIN, Launch, WarmLaunch, warm_wanted
from nerve_cli.kernel.supervision.watchdog import Watchdog
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import BACKLOG, Reason
from nerve_cli.wire import containment


@dataclass(frozen=True)
class Options:
    """How `nerve run` was asked to run."""

    run_for: float | None = None  # stop after this many seconds
    watch: bool = True  # hot reload
    metrics: ListenAddress | None = None  # --metrics (else engine.metrics)
    webhooks: ListenAddress | None = None  # --webhooks (else engine.webhooks)


class Engine:
    def __init__(self, home: Path, report: Callable[[str, str], None], *, run_for: float | None = None,
                 watch: bool = True, metrics: ListenAddress | None = None,
                 webhooks: ListenAddress | None = None) -> None:
        self.home = home
        self.layout = Layout(home)
        self.report = report
        self.options = Options(run_for, watch, metrics, webhooks)
        config, warnings = load_config_and_warnings(home)
        self.current = Current(config, [str(p) for p in warnings])
        for problem in self.current.warnings:
            report("warn", problem)
        self.started_at = time.time()
        self.forced = False  # a second stop signal: workers are killed, nothing waits
        self.desk: Desk | None = None  # the running engine as its edges see it (once it runs)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []  # file watching, the daily archive
        self._halts: list[Callable[[], object]] = []  # what each part does first when stopping (no new work)

    # lifecycle -------------------------------------------------------------
    async def run(self) -> int:
        lock = InstanceLock(self.home).acquire()
        try:
            return await self._run_locked()
        finally:
            lock.release()

    async def _run_locked(self) -> int:
        # from the first part on, whatever goes wrong, what started is unwound: never a hung engine
        async with AsyncExitStack() as stack:
            desk = await self._open(stack)
            await self._start(stack, desk)
            desk.pump()
            await self._stop.wait()
        self.report("info", "engine stopped")
        return 0

    async def _open(self, stack: AsyncExitStack) -> Desk:
        """Build the parts, in order; each registers its teardown as it is made (unwound in reverse)."""
        loop = asyncio.get_running_loop()
        home, layout, report, current = self.home, self.layout, self.report, self.current
        config = current.config
        logs = LogStore(layout.logs_db)
        stack.callback(logs.close)
        tracing = edges.start_tracing(stack, config, home, report, lambda: bool(current.config.agents))
        if tracing is not None:
            logs.tap = tracing.row  # threads, rounds and model calls come from the rows their manager writes
        writer = LogWriter(logs, layout.logs_db, report)
        stack.push_async_callback(writer.close)
        self._halts.append(writer.stop)  # from then on rows wait for the store's close, which commits them
        log = writer.log
        ledger = Ledger(layout, logs, log)
        signals, events = ledger.start()  # before anything reads the log: it owes these rows
        if signals or events:
            report("warn", f"logged {signals} signal(s) and {events} event(s) committed while no engine "
                           "was logging them (a previous engine was killed, or `nerve emit` stored them)")
        logs.flush()
        health = HealthStore(layout.sense_db(HEALTH_SENSE))
        stack.callback(health.close)
        threads = ThreadsStore(layout.sense_db(THREADS_SENSE), layout.logs_db)
        stack.callback(threads.close)
        if not logs.anchored:  # a logs.db from before the completion anchors: scanned once, off the loop
            await loop.run_in_executor(None, logs.backfill_anchors)
        completions = {k: v / 1000 for k, v in logs.last_completions().items()}
        stats = EngineStats()
        stats.restore(logs.meta_with_prefix(SUCCESS_MARK), logs.meta_with_prefix(SIGNAL_MARK))
        # every sense is held until its group's worker says it is ready (the built-in senses are the kernel's own)
        scheduler = Scheduler(config, completions, config.kernel_senses(), now=time.time(), hold_new=True)

        def trigger(sense: str, reason: Reason) -> None:  # (the outcomes part, made below, is the loop's entry)
            outcomes.trigger(sense, reason)

        freshness = FreshnessWatch(Freshness(), layout.sense_db, log, report, trigger)
        await freshness.load(config)
        self._halts.append(freshness.stop)
        guards = Guards(config.engine, scheduler, logs, log, report)
        guards.restore()
        groups = Groups(home, lambda: current.config)
        builtins = Builtins(health, threads, lambda: health_payload(desk.snapshot(), freshness.freshness),
                            layout.sense_db)
        stack.push_async_callback(builtins.close)  # its rows and run_complete, before the files close
        stack.callback(self._stopped, ledger, log)  # once every worker is down
        # each worker's descendants in a cgroup where the engine may make them (before any worker or template
        # starts: they read where from the environment); what a killed engine's workers left there ends now
        cgroups = containment.open_cgroups(home)
        stack.push_async_callback(loop.run_in_executor, None, containment.close_cgroups, cgroups)
        # workers fork from a warm template where the platform allows (plain starts otherwise)
        launch: Launch = WarmLaunch(home, report, config.engine.preload) if warm_wanted() else PLAIN
        if isinstance(launch, WarmLaunch):
            stack.push_async_callback(launch.close)
        groups.launch = launch
        workflows = WorkflowManager(home, config, logs, report, launch=launch, emit=self._thread_emit,
                                    on_statuses=lambda: trigger(THREADS_SENSE, BACKLOG))
        workflows.add_listener(stats.workflow_event)
        stack.push_async_callback(lambda: workflows.stop(self._timeout()))
        stack.push_async_callback(lambda: groups.stop_all(self._timeout()))
        delivery = Delivery(layout.data, config, trigger, scheduler.starts)
        files = edges.FileEdge(home, trigger, log, report)
        stack.push_async_callback(files.close)
        causes = Causes(current.causal_bound, log, report)
        router = Router(scheduler, ledger, delivery, freshness, stats, log, report, workflows=workflows,
                        tracing=tracing, report_signals=self._verbosity() >= 1, causes=causes)
        emits = EmitDesk(layout.events_db, lambda stored: outcomes.emitted(stored))
        stack.push_async_callback(emits.close)
        fleet = edges.FleetEdge(router, layout.data, emits.emit_many, log, report,
                                tracing.traceparent if tracing is not None else None)
        stack.push_async_callback(fleet.close)  # before the emit desk: the inbox commits through it
        computes, reads = Computes(), Reads()
        pump = Pump(scheduler, current, groups, builtins, delivery, reads, computes, stats, log, report,
                    lambda: None, started_at=self.started_at, tracing=tracing,
                    report_computes=self._verbosity() >= 2, causes=causes)
        self._halts.append(pump.stop)
        outcomes = Outcomes(current, scheduler, router, pump, groups, builtins, computes, reads, guards, delivery,
                            ledger, logs, stats, log, report, layout, self._peer_read, tracing=tracing,
                            report_computes=self._verbosity() >= 2, report_signals=self._verbosity() >= 1)
        watchdog = Watchdog(groups.supervisors, lambda: current.config.groups, outcomes.breach)
        self._halts.append(watchdog.stop)
        self.desk = desk = Desk(home, layout, current, self.started_at, scheduler, outcomes, groups, delivery, emits,
                                stats, logs, log, report, freshness, guards, watchdog, workflows, fleet, files)
        desk.notifier = make_notifier(stack, home, lambda: current.config, desk.link_base, report)
        router.subscribe(desk.notifier)  # it wakes on nerve-threads' and nerve-health's signals
        metrics_at = self.options.metrics or config.engine.metrics
        await edges.start_metrics(stack, desk, metrics_at, log, report)
        log(logrows.engine_started(os.getpid(), sorted(config.enabled_senses()), sorted(config.sense_groups()),
                                   eventloop.name()))
        for warning in current.warnings:
            log(logrows.warning("nerve.yaml", warning))
        if metrics_at is not None and not metrics_at.loopback:
            log(logrows.warning("metrics", edges.exposed_metrics(metrics_at)))
        report("info", f"engine pid={os.getpid()} started on {home}")
        return desk

    async def _start(self, stack: AsyncExitStack, desk: Desk) -> None:
        """Open the edges and start the workers (each edge registers its own teardown)."""
        loop = asyncio.get_running_loop()
        stack.callback(self._halt)  # the first to run when stopping (whatever started after it)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        if isinstance(desk.processes.launch, WarmLaunch):
            desk.processes.launch.open()  # its imports overlap the control socket's start; the first workers wait
        control = ControlServer(self.layout.socket, self._handle_request, self._control_busy)
        await control.start()
        stack.push_async_callback(control.close)
        desk.fleet_edge.start(desk.config.live_fleet())
        desk.webhooks = await edges.start_webhooks(stack, desk, self.options.webhooks or desk.config.engine.webhooks,
                                                   desk.log, self.report)
        desk.notifier.start()  # once the listener its answer links point at is up
        desk.console = await start_console(stack, self.home, desk.config.engine.ui, self.report)
        if desk.workflows is not None:
            await desk.workflows.start()
        codex = CodexDeliveries(self.home, desk.current, self.report)  # agents delivered to Codex (its own part)
        codex.start()
        stack.push_async_callback(codex.close)
        desk.outcomes.trigger(THREADS_SENSE, BACKLOG)  # transitions logged while no engine signalled them
        desk.processes.start_all()
        desk.files.apply_config(desk.config)
        desk.freshness_watch.check()
        desk.watchdog.update()
        stop_watching = asyncio.Event()
        if self.options.watch:
            self._tasks.append(loop.create_task(self._watch_files(desk, stop_watching)))
        self._tasks.append(loop.create_task(archive_daily(self.home, lambda: desk.config.engine.archive_after,
                                                          desk.log, self.report)))
        if self.options.run_for is not None:
            loop.call_later(self.options.run_for, self._stop.set)
        self._halts.append(stop_watching.set)
        self._halts.extend(task.cancel for task in self._tasks)

    def _halt(self) -> None:
        """Stop scheduling: no timer, no new compute, no reload; the parts unwound next let what runs finish."""
        for halt in self._halts:
            halt()
        self._halts.clear()

    def _stopped(self, ledger: Ledger, log: Any) -> None:
        """Every worker is down: what they committed unanswered is logged, then the engine's last row."""
        ledger.catch_up_all([*self.current.config.senses, *BUILTIN_SENSES])
        log(logrows.engine_stopped(os.getpid(), round(time.time() - self.started_at, 3)))

    def _timeout(self) -> float:
        return 0.0 if self.forced else self.current.config.engine.shutdown_timeout

    def _verbosity(self) -> int:
        return getattr(self.report, "verbosity", 2)  # don't format lines nobody sees

    def _on_stop_signal(self, sig: int) -> None:
        if self._stop.is_set():
            self.forced = True
            self.report("warn", "second stop signal: killing workers now")
            if self.desk is not None:
                self.desk.processes.kill_all()
            return
        self.report("info", f"{signal.Signals(sig).name}: stopping (again to force)")
        self._stop.set()

    async def _watch_files(self, desk: Desk, stop: asyncio.Event) -> None:
        # imported here: watchfiles loads only when the engine watches files (not with --no-watch)
        from nerve_cli.kernel.reload.watch import Changes, watch

        async def on_change(changes: Changes) -> None:
            if self._halts:  # (emptied when stopping)
                await reload.apply_changes(desk, changes)

        try:
            await watch(self.home, on_change, stop)
        except Exception as exc:  # the engine keeps running without hot reload, and says so
            self.report("error", f"file watching stopped: {type(exc).__name__}: {exc}; restart the engine to reload")

    # the edges' callbacks ------------------------------------------------------
    async def _handle_request(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.desk is not None
        return await requests.handle(self.desk, request)

    async def _peer_read(self, group: str, message: Any) -> str | None:
        assert self.desk is not None
        return await requests.read_peer(self.desk, group, message)

    async def _thread_emit(self, channel: str, payload: Any, key: str | None,
                           cause: Any = None) -> tuple[int, bool, list[str]]:
        assert self.desk is not None
        return await self.desk.thread_emit(channel, payload, key, cause)

    def _control_busy(self, event: str, detail: dict) -> None:
        assert self.desk is not None
        self.desk.log(logrows.control_busy(detail["connections"], detail["limit"], detail["idle_timeout_s"]))
        self.report("warn", f"control socket: {detail['limit']} connections open, refusing more until some close "
                            f"(an idle one closes after {detail['idle_timeout_s']:g}s)")
