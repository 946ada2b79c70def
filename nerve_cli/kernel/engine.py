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
import signal
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Callable

from nerve_cli.address import ListenAddress
from nerve_cli.config.load import load_config_and_warnings
from nerve_cli.config.model import THREADS_SENSE
from nerve_cli.home import Layout
from nerve_cli.kernel.control import requests
from nerve_cli.kernel.control.health import health_payload
from nerve_cli.kernel.control.server import ControlServer
from nerve_cli.kernel.core.archive_job import archive_daily
from nerve_cli.kernel.core.causes import Causes
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.ingress.console import start_console
from nerve_cli.kernel.loop import edges
from nerve_cli.kernel.loop.builtins import Builtins
from nerve_cli.kernel.loop.current import Current, Options
from nerve_cli.kernel.loop.deliveries import CodexDeliveries
from nerve_cli.kernel.loop.desk import Desk
from nerve_cli.kernel.loop.fanout import FanOut
from nerve_cli.kernel.loop.freshness import FreshnessWatch
from nerve_cli.kernel.loop.outcomes import Outcomes
from nerve_cli.kernel.loop.pump import Pump
from nerve_cli.kernel.loop.records import Computes
from nerve_cli.kernel.loop.router import Router
from nerve_cli.kernel.loop.stores import announce, log_stopped, open_stores
from nerve_cli.kernel.notify.edge import make_notifier
from nerve_cli.kernel.reload import apply as reload
from nerve_cli.kernel.supervision.fds import raise_open_file_limit
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.launch import WarmLaunch, open_launch
from nerve_cli.kernel.supervision.watchdog import Watchdog
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.lock import InstanceLock
from nerve_cli.vocab.reasons import BACKLOG, Reason
from nerve_cli.wire import containment


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
        raised = raise_open_file_limit()  # before any worker starts: they inherit it
        if raised is not None:
            self.report("debug", f"open-file limit raised from {raised[0]} to {raised[1]}: each sense keeps files open")
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
        tracing = edges.start_tracing(stack, config, home, report, lambda: bool(current.config.agents))
        stores = await open_stores(stack, layout, report, tracing.row if tracing is not None else None, self._halts)
        logs, log, ledger, stats = stores.logs, stores.log, stores.ledger, stores.stats
        health, threads, completions = stores.health, stores.threads, stores.completions
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
        stack.callback(lambda: log_stopped(ledger, log, current.config, self.started_at))  # every worker down
        # each worker's descendants in a cgroup where the engine may make them (before any worker or template
        # starts: they read where from the environment); what a killed engine's workers left there ends now
        cgroups = containment.open_cgroups(home)
        stack.push_async_callback(loop.run_in_executor, None, containment.close_cgroups, cgroups)
        groups.launch = launch = open_launch(stack, home, report, config.engine.preload, layout.sense_data)
        workflows = WorkflowManager(home, config, logs, report, launch=launch, emit=self._thread_emit,
                                    on_statuses=lambda: trigger(THREADS_SENSE, BACKLOG))
        workflows.add_listener(stats.workflow_event)
        stack.push_async_callback(lambda: workflows.stop(self._timeout()))
        stack.push_async_callback(lambda: groups.stop_all(self._timeout()))
        delivery = Delivery(layout.data, config, trigger, scheduler.starts)
        files = edges.FileEdge(home, trigger, log, report)
        stack.push_async_callback(files.close)
        causes = Causes(current.causal_bound, log, report, current.bound_into)
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
        outcomes.fanout = fanout = FanOut(current, causes, emits, log, report, logs, layout)
        fanout.replay_all(config.senses)  # what computes committed and a killed kernel or worker never handed over
        watchdog = Watchdog(groups.supervisors, lambda: current.config.groups, outcomes.breach)
        self._halts.append(watchdog.stop)
        self.desk = desk = Desk(home, layout, current, self.started_at, scheduler, outcomes, groups, delivery, emits,
                                stats, logs, log, report, freshness, guards, watchdog, workflows, fleet, files)
        desk.tracing = tracing
        desk.notifier = make_notifier(stack, home, lambda: current.config, desk.link_base, report)
        router.subscribe(desk.notifier)  # it wakes on nerve-threads' and nerve-health's signals
        metrics_at = self.options.metrics or config.engine.metrics
        await edges.start_metrics(stack, desk, metrics_at, log, report)
        announce(log, report, home, config, current.warnings, metrics_at)
        return desk

    async def _start(self, stack: AsyncExitStack, desk: Desk) -> None:
        """Open the edges and start the workers (each edge registers its own teardown)."""
        loop = asyncio.get_running_loop()
        stack.callback(self._halt)  # the first to run when stopping (whatever started after it)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        if isinstance(desk.processes.launch, WarmLaunch):
            desk.processes.launch.open()  # its imports overlap the control socket's start; the first workers wait
        control = ControlServer(self.layout.socket, self._handle_request, desk.control_busy)
        await control.start()
        stack.push_async_callback(control.close)
        desk.fleet_edge.start(desk.config.live_fleet())
        desk.webhooks = await edges.start_webhooks(stack, desk, self.options.webhooks or desk.config.engine.webhooks,
                                                   desk.log, self.report)
        desk.notifier.start()  # once the listener its answer links point at is up
        desk.console = await start_console(stack, self.home, desk.config.engine.ui, self.report)
        if desk.workflows is not None:
            await desk.workflows.start()
        CodexDeliveries(self.home, desk.current, self.report).start_into(stack)  # agents delivered to Codex
        desk.outcomes.trigger(THREADS_SENSE, BACKLOG)  # transitions logged while no engine signalled them
        desk.processes.start_all()
        desk.files.apply_config(desk.config)
        desk.freshness_watch.check()
        desk.watchdog.update()
        stop_watching = asyncio.Event()
        if self.options.watch:
            running = lambda: bool(self._halts)  # noqa: E731  (emptied when stopping: no reload then)
            self._tasks.append(loop.create_task(reload.watch_and_apply(self.home, desk, stop_watching, running,
                                                                       self.report)))
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

