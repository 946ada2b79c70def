"""The kernel: one asyncio process that never imports user code.

It owns the scheduler (pure rules), one supervisor per sense group, the
signal bus (in memory, routing a signal to the reflexes that listen), the log
writer, the built-in health sense, the workflow manager and the control
socket. Every decision is event-driven: a signal reaching a listener starts
its compute in the same loop iteration; the only timer is the one armed for
the scheduler's next wake-up.

The engine's parts never import it: each is handed what it needs (guards the
scheduler and the log store, the watchdog the supervisors and a breach
callback), or drives the engine through a small Protocol it declares
(`supervisor.GroupHooks`, `reload.Target`, `requests.Target`).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import orjson

from nerve_cli import eventloop
from nerve_cli.address import ListenAddress
from nerve_cli.clock import now_ms
from nerve_cli.config.load import load_config_and_warnings
from nerve_cli.config.model import BUILTIN_SENSES, THREADS_SENSE, NerveConfig
from nerve_cli.config.projection import BindError, Reading, readings
from nerve_cli.home import Layout
from nerve_cli.kernel.control import requests
from nerve_cli.kernel.control.health import HEALTH_SENSE, HealthStore, health_payload
from nerve_cli.kernel.control.server import ControlServer
from nerve_cli.kernel.control.threads_sense import ThreadsStore
from nerve_cli.kernel.core.archive_job import archive_daily
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.freshness import Freshness
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.listeners import ListenerHealth, Snapshot, listeners_of
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.scheduler import Scheduler, Start
from nerve_cli.kernel.core.stats import SIGNAL_MARK, SUCCESS_MARK, EngineStats
from nerve_cli.kernel.reload import apply as reload
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.launch import PLAIN, Launch, WarmLaunch, warm_wanted
from nerve_cli.kernel.supervision.penalty import Blame
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.supervisor import GroupSupervisor, Inflight
from nerve_cli.kernel.supervision.watchdog import Watchdog
from nerve_cli.kernel.trace.settings import trace_settings
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.names import binding_key, default_host
from nerve_cli.store.events import last_signal_ms
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogKind, LogRow
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import BACKLOG, DEMAND, FRESHNESS, OVERDUE, READ, REPLAY, Reason, TriggerKind
from nerve_cli.wire import containment, protocol

if TYPE_CHECKING:
    from nerve_cli.config.model import FleetConfig
    from nerve_cli.kernel.control.metrics_http import MetricsServer
    from nerve_cli.kernel.fleet.service import Fleet
    from nerve_cli.kernel.ingress.files import FileReflexes
    from nerve_cli.kernel.ingress.webhooks import WebhookServer
    from nerve_cli.kernel.reload.watch import Changes
    from nerve_cli.kernel.trace.spans import Tracing

FLUSH_DELAY = 0.01  # log rows are committed in batches at most this old


class Engine:
    def __init__(self, home: Path, report: Callable[[str, str], None], *, run_for: float | None = None,
                 watch: bool = True, metrics: ListenAddress | None = None,
                 webhooks: ListenAddress | None = None) -> None:
        self.home = home
        self.layout = Layout(home)
        self.report = report
        self.run_for = run_for
        self.watch = watch
        self.report_signals = getattr(report, "verbosity", 1) >= 1  # don't format lines nobody sees
        self.report_computes = getattr(report, "verbosity", 2) >= 2
        self._watch_stop = asyncio.Event()
        self._watcher: asyncio.Task | None = None
        self.fleet: Fleet | None = None  # this host in its fleet, when nerve.yaml has an enabled `fleet:`
        self.tracing: Tracing | None = None  # spans over OpenTelemetry, when engine.otel or OTEL_* switch them on
        self._fleet_change: asyncio.Task | None = None
        self._archiver: asyncio.Task | None = None
        self.control: ControlServer | None = None
        self._health_write: asyncio.Future | None = None  # the health row being written, if any
        self._threads_write: asyncio.Future | None = None  # the nerve-threads rows being written, if any
        config, warnings = load_config_and_warnings(home)
        self.config: NerveConfig = config
        self.warnings: list[str] = [str(p) for p in warnings]  # nerve.yaml's, shown and counted apart from errors
        for problem in self.warnings:
            report("warn", problem)
        self.started_at = time.time()
        self.stopping = False
        self.forced = False
        self.next_id = 1
        self.groups: dict[str, GroupSupervisor] = {}
        self.errors: dict[str, dict[str, Any]] = {}
        self.recent_errors: list[dict[str, Any]] = []
        self.outputs: dict[int, list[dict[str, str]]] = {}  # compute id → the lines it printed (bounded by the worker)
        self.compute_errors: dict[int, dict[str, Any]] = {}  # compute id → its error, for whoever waits on it
        self.reads = Reads()  # who waits for a compute of a sense (and with which parameter values)
        self.readings: dict[str, Reading] = readings(config)
        self.bound: dict[int, str | None] = {}  # compute id → the parameter values it reads with
        self.launches: dict[int, dict[str, Any]] = {}  # compute id → its directive and the thread it started
        self.stats = EngineStats()
        self.metrics_at = metrics or config.engine.metrics  # where to serve Prometheus metrics, or None
        self.metrics: MetricsServer | None = None
        self.webhooks_at = webhooks  # from `nerve run --webhooks`; else engine.webhooks, else off
        self.webhooks: WebhookServer | None = None
        self.files: FileReflexes | None = None  # while a reflex watches paths
        self.freshness = Freshness()
        self._freshness_timer: asyncio.TimerHandle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # epoch seconds the armed timer fires at
        self._flush_handle: asyncio.TimerHandle | None = None
        self._pumping = False
        self._repump = False
        self._flushing: asyncio.Future | None = None
        self._flush_again = False
        self._stop = asyncio.Event()
        self.cgroups: Path | None = None  # where its workers' cgroups are (None: each worker is a subreaper)

    # lifecycle -------------------------------------------------------------
    async def run(self) -> int:
        lock = InstanceLock(self.home).acquire()
        try:
            return await self._run_locked()
        finally:
            lock.release()

    async def _run_locked(self) -> int:
        loop = asyncio.get_running_loop()
        if self.metrics_at is not None:
            # prometheus-client loads only with --metrics or engine.metrics (off by default)
            from nerve_cli.kernel.control.metrics import registry
            from nerve_cli.kernel.control.metrics_http import MetricsServer

            self.metrics = MetricsServer(registry(self), self.metrics_at.host, self.metrics_at.port,
                                         self._metrics_busy, self.refresh_listener_health)
            await self.metrics.start()
            self.report("info", f"metrics on {self.metrics.url}")
            if not self.metrics_at.loopback:
                self.report("warn", exposed_metrics(self.metrics_at))
        self.logs = LogStore(self.layout.logs_db)
        self._start_tracing()
        self.ledger = Ledger(self.layout, self.logs, self.log)
        signals, events = self.ledger.start()  # before anything reads the log: it owes these rows
        if signals or events:
            self.report("warn", f"logged {signals} signal(s) and {events} event(s) committed while no engine "
                                "was logging them (a previous engine was killed, or `nerve emit` stored them)")
        self.logs.flush()
        try:
            self.health = HealthStore(self.layout.sense_db(HEALTH_SENSE))
            self.threads_feed = ThreadsStore(self.layout.sense_db(THREADS_SENSE), self.layout.logs_db)
        except BaseException:
            self.logs.close()
            raise
        if not self.logs.anchored:  # a logs.db from before the completion anchors: scanned once, off the loop
            await loop.run_in_executor(None, self.logs.backfill_anchors)
        completions = {k: v / 1000 for k, v in self.logs.last_completions().items()}
        self.stats.restore(self.logs.meta_with_prefix(SUCCESS_MARK), self.logs.meta_with_prefix(SIGNAL_MARK))
        # every sense is held until its group's worker says it is ready (the health sense is the kernel's own)
        self.scheduler = Scheduler(self.config, completions, {HEALTH_SENSE: self.config.engine.health_interval,
                                                              THREADS_SENSE: None}, now=time.time(), hold_new=True)
        await self._start_freshness(loop)
        self.guards = Guards(self.config.engine, self.scheduler, self.logs, self.log, self.report)
        self.guards.restore()
        self.watchdog = Watchdog(self.groups, lambda: self.config.groups, self.watchdog_breach)
        # each worker's descendants in a cgroup where the engine may make them (before any worker or template
        # starts: they read where from the environment); what a killed engine's workers left there ends now
        self.cgroups = containment.open_cgroups(self.home)
        # workers fork from a warm template where the platform allows (plain starts otherwise)
        self.launch: Launch = WarmLaunch(self.home, self.report) if warm_wanted() else PLAIN
        self.workflows: WorkflowManager | None = WorkflowManager(
            self.home, self.config, self.logs, self.report, launch=self.launch, emit=self._thread_emit,
            on_statuses=lambda: self._trigger(THREADS_SENSE, BACKLOG))
        self.workflows.add_listener(self.stats.workflow_event)
        self.delivery = Delivery(self.layout.data, self.config, self._trigger)
        self.listener_health = ListenerHealth(self.home)
        self.emits = EmitDesk(self.layout.events_db, self._route_events)
        self.log(logrows.engine_started(os.getpid(), sorted(self.config.enabled_senses()),
                                        sorted(self.config.sense_groups()), eventloop.name()))
        for warning in self.warnings:
            self.log(logrows.warning("nerve.yaml", warning))
        if self.metrics_at is not None and not self.metrics_at.loopback:
            self.log(logrows.warning("metrics", exposed_metrics(self.metrics_at)))
        self.report("info", f"engine pid={os.getpid()} started on {self.home}")
        try:  # from here on, whatever goes wrong, the workers and files are shut down: never a hung engine
            await self._start_parts(loop)
            self.pump()
            await self._stop.wait()
        finally:
            await self._shutdown()
        return 0

    async def _start_parts(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        if isinstance(self.launch, WarmLaunch):
            self.launch.open()  # its imports overlap the control socket's start; the first workers wait for it
        self.control = ControlServer(self.layout.socket, self._handle_request, self._control_busy)
        await self.control.start()
        self._start_fleet(self.config.live_fleet())
        await self._start_webhooks()
        if self.workflows is not None:
            await self.workflows.start()
        self._trigger(THREADS_SENSE, BACKLOG)  # transitions logged while no engine signalled them
        for group, senses in self.config.sense_groups().items():
            self.start_group(group, senses)
        self._apply_file_reflexes()
        self._check_freshness()
        self.watchdog.update()
        if self.watch:
            self._watcher = loop.create_task(self._watch_files())
        self._archiver = loop.create_task(self._archive_daily())
        if self.run_for is not None:
            loop.call_later(self.run_for, self._stop.set)

    def _start_tracing(self) -> None:
        settings = trace_settings(self.config.engine)
        if settings is None:
            return
        try:
            # imported here: OpenTelemetry (the optional `otel` extra) loads only when tracing is switched on
            from nerve_cli.kernel.trace.spans import Tracing
        except ImportError as exc:
            self.report("warn", f"traces are switched on (engine.otel or OTEL_EXPORTER_OTLP_ENDPOINT) but "
                                f"OpenTelemetry is not installed ({exc.name}): pip install 'nerve-cli[otel]'; "
                                "running without traces")
            return
        fleet = self.config.live_fleet()
        self.tracing = Tracing(settings, fleet.host_name if fleet is not None else default_host(), str(self.home),
                               self.report)
        self.logs.tap = self.tracing.row  # threads, rounds and model calls come from the rows their manager writes
        self.report("info", f"traces to {settings.endpoint or 'the OTEL_EXPORTER_OTLP_* endpoint'}")

    def _start_fleet(self, config: FleetConfig | None) -> None:
        if config is None:
            return
        # imported here: nats loads only in an engine whose nerve.yaml has a fleet
        from nerve_cli.kernel.fleet.service import Fleet

        traceparent = self.tracing.traceparent if self.tracing is not None else None
        self.fleet = Fleet(config, self.layout.data, self.emits.emit_many, self.log, self.report, traceparent)
        self.fleet.start()

    async def _change_fleet(self, config: FleetConfig | None) -> None:
        """nerve.yaml's fleet section changed: the old link closes, a new one starts (the outbox keeps its marks)."""
        if self.fleet is not None:
            await self.fleet.close()
            self.fleet = None
        if not self.stopping:
            self._start_fleet(config)
    async def _start_freshness(self, loop: asyncio.AbstractEventLoop) -> None:
        """Expect what nerve.yaml says, counting from each sense's last signal on disk (read off the loop)."""
        self.freshness.apply_config(self.config, time.time())
        names = list(self.freshness.expected)
        found = await loop.run_in_executor(None, lambda: {n: last_signal_ms(self.layout.sense_db(n)) for n in names})
        for name, ms in found.items():
            if ms is not None:
                self.freshness.last[name] = ms / 1000

    def _check_freshness(self) -> None:
        """Mark what went stale, tell nerve-health at once, and arm the timer for the next deadline."""
        self._freshness_timer = None
        if self.stopping:
            return
        for sense in self.freshness.check(time.time()):
            period = self.freshness.expected[sense]
            self.log(logrows.sense_stale(sense, period, _ms(self.freshness.last.get(sense))))
            self.report("warn", f"{sense} is stale: no signal for {period:g}s (expect_signal_every)")
            self._trigger(HEALTH_SENSE, FRESHNESS)
        wake = self.freshness.next_check()
        if wake is not None:
            loop = asyncio.get_running_loop()
            self._freshness_timer = loop.call_at(loop.time() + max(0.0, wake - time.time()), self._check_freshness)

    def _rearm_freshness(self) -> None:
        if self._freshness_timer is not None:
            self._freshness_timer.cancel()
        self._check_freshness()

    async def _start_webhooks(self) -> None:
        address = self.webhooks_at or self.config.engine.webhooks
        if address is None:
            return
        # uvicorn and starlette load only when webhooks are on
        from nerve_cli.kernel.ingress.webhooks import WebhookServer

        self.webhooks = WebhookServer(self, address, self.report)
        await self.webhooks.start()
        self.log(logrows.webhooks_started(self.webhooks.url, sorted(self.config.webhook_channels())))
        self.report("info", f"webhooks on {self.webhooks.url}CHANNEL")

    def _apply_file_reflexes(self) -> None:
        if self.files is None:
            if not any(r.paths for r in self.config.active_reflexes()):
                return
            # watchfiles' file reflexes load only when a reflex watches paths
            from nerve_cli.kernel.ingress.files import FileReflexes

            self.files = FileReflexes(self.home, self._trigger, self.log, self.report)
        self.files.apply_config(self.config)

    def start_group(self, group: str, senses: list[str]) -> None:
        supervisor = GroupSupervisor(group, senses, self.home, self.config, self, launch=self.launch)
        self.groups[group] = supervisor
        supervisor.start()

    def _on_stop_signal(self, sig: int) -> None:
        if self._stop.is_set():
            self.forced = True
            self.report("warn", "second stop signal: killing workers now")
            for supervisor in self.groups.values():
                supervisor.kill()
            return
        self.report("info", f"{signal.Signals(sig).name}: stopping (again to force)")
        self._stop.set()

    async def _watch_files(self) -> None:
        # imported here: watchfiles loads only when the engine watches files (not with --no-watch)
        from nerve_cli.kernel.reload.watch import watch

        async def on_change(changes: Changes) -> None:
            if not self.stopping:
                await reload.apply_changes(self, changes)

        try:
            await watch(self.home, on_change, self._watch_stop)
        except Exception as exc:  # the engine keeps running without hot reload, and says so
            self.report("error", f"file watching stopped: {type(exc).__name__}: {exc}; restart the engine to reload")

    async def _archive_daily(self) -> None:
        await archive_daily(self.home, lambda: self.config.engine.archive_after, self.log, self.report)

    # hot reload (reload.Target) ---------------------------------------------
    def use_config(self, config: NerveConfig) -> None:
        self.config = config
        self.readings = readings(config)
        # a sense that joins keeps its rhythm from disk, like at start-up (the log store keeps every
        # sense's last completion in memory: no query here); cron times count from now
        completions = {k: v / 1000 for k, v in self.logs.last_completions().items()}
        self.scheduler.apply_config(config, completions, now=time.time())
        self.refresh_runnable(list(self.scheduler.states))  # senses may have joined or changed group
        self.delivery.apply_config(config)  # changed on: lists: a new source's waiting events are delivered
        self._apply_file_reflexes()
        self.freshness.apply_config(config, time.time())
        self._rearm_freshness()
        if config.live_fleet() != (self.fleet.config if self.fleet is not None else None):
            previous = self._fleet_change
            self._fleet_change = asyncio.get_running_loop().create_task(self._after(previous, config.live_fleet()))

    async def _after(self, previous: asyncio.Task | None, config: FleetConfig | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        await self._change_fleet(config)

    def config_applied(self) -> None:
        if self.webhooks_at is None and self.config.engine.webhooks != (self.webhooks and self.webhooks.address):
            self.report("warn", "engine.webhooks changed: restart the engine to listen there "
                                "(the channels' settings apply at once)")
        if self.workflows is not None:
            self.workflows.update_config(self.config)
        self.guards.update_config(self.config.engine)
        self.watchdog.update()

    async def _shutdown(self) -> None:
        self.stopping = True
        self.watchdog.stop()
        if self._archiver is not None:
            self._archiver.cancel()
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.cancel()
        if self._timer:
            self._timer.cancel()
        if self._freshness_timer is not None:
            self._freshness_timer.cancel()
        if self.control is not None:
            await self.control.close()
        if self.metrics is not None:
            await self.metrics.close()
        if self.webhooks is not None:
            await self.webhooks.close()  # what is in flight is answered after its commit, below
        if self._fleet_change is not None:
            await asyncio.gather(self._fleet_change, return_exceptions=True)
        if self.fleet is not None:  # before the emit desk: the inbox commits through it
            await self.fleet.close()
        await self.emits.close()
        if self.files is not None:
            await self.files.close()
        timeout = 0.0 if self.forced else self.config.engine.shutdown_timeout
        await asyncio.gather(*(s.stop(timeout) for s in self.groups.values()))
        if self.workflows is not None:
            await self.workflows.stop(timeout)
        if isinstance(self.launch, WarmLaunch):
            await self.launch.close()
        await asyncio.get_running_loop().run_in_executor(None, containment.close_cgroups, self.cgroups)
        self.ledger.catch_up_all([*self.config.senses, *BUILTIN_SENSES])
        self.log(logrows.engine_stopped(os.getpid(), round(time.time() - self.started_at, 3)))
        for write in (self._health_write, self._threads_write):
            if write is not None:
                await asyncio.wait([write])  # its rows and run_complete, before the files close
        if self._flushing is not None:
            await asyncio.wait([self._flushing])
        if self.tracing is not None:  # what is still queued goes, within the exporter's timeout
            await asyncio.get_running_loop().run_in_executor(None, self.tracing.close)
        self.logs.close()
        self.health.close()
        self.threads_feed.close()
        self.report("info", "engine stopped")

    # logging ---------------------------------------------------------------
    def log(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None:
        self.logs.write(row, ts, mark)
        if self._flush_handle is None and not self.stopping:
            self._flush_handle = asyncio.get_running_loop().call_later(FLUSH_DELAY, self._flush)

    def _flush(self) -> None:
        """Commit buffered rows off the event loop: a `nerve archive` VACUUM may hold the database for a while."""
        self._flush_handle = None
        if self._flushing is not None:
            self._flush_again = True
            return
        self._flushing = asyncio.get_running_loop().run_in_executor(None, self.logs.flush)
        self._flushing.add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future) -> None:
        self._flushing = None
        loop = asyncio.get_running_loop()
        if future.exception() is not None:  # disk full, locked: the rows stay buffered; retry and say so
            self.report("error", f"could not write {self.layout.logs_db}: {future.exception()}; retrying")
            self._flush_handle = loop.call_later(1.0, self._flush)
        elif self._flush_again or self.logs.pending():
            self._flush_again = False
            if self._flush_handle is None and not self.stopping:
                self._flush_handle = loop.call_later(FLUSH_DELAY, self._flush)

    # scheduling ------------------------------------------------------------
    def refresh_runnable(self, senses: Iterable[str]) -> None:
        """Tell the scheduler which of `senses` a ready worker can take now (the others keep their triggers)."""
        ready: list[str] = []
        held: list[str] = []
        for sense in senses:
            settings = self.config.senses.get(sense)
            if settings is None:
                continue  # the kernel's own (nerve-health) computes in the kernel: no worker to wait for
            supervisor = self.groups.get(settings.group)
            (ready if supervisor is not None and sense in supervisor.runnable() else held).append(sense)
        self.scheduler.set_runnable(held, False)
        self.scheduler.set_runnable(ready, True)

    def pump(self) -> None:
        """Start whatever is due now and make sure a timer is armed for the next wake-up.

        Costs O(log N) per start whatever the number of senses N: the scheduler
        answers from its heaps and knows which senses can run (the supervisors
        say when that changes, through `group_runnable`).
        """
        if self.stopping:
            return
        if self._pumping:  # an outcome inside a dispatch asked again: loop once more
            self._repump = True
            return
        self._pumping = True
        try:
            self._repump = True
            while self._repump:
                self._repump = False
                now = time.time()
                for start in self.scheduler.take_due(now):
                    self._dispatch(start, now)
        finally:
            self._pumping = False
            # whatever a dispatch did: a lost timer meant no interval sense ever ran again
            self._arm(self.scheduler.next_wakeup())

    def _arm(self, wake: float | None) -> None:
        """One timer, for the earliest wake-up. A timer armed earlier than needed is kept: it finds
        nothing due, and the pump it runs arms the next one. So a hop re-arms nothing."""
        if self.stopping or wake is None or (self._timer is not None and self._timer_at <= wake):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = wake
        self._timer = loop.call_at(loop.time() + max(0.0, wake - time.time()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.pump()

    def _dispatch(self, start: Start, now: float) -> None:
        compute_id, self.next_id = self.next_id, self.next_id + 1
        reason = start.reason
        if reason.kind in (TriggerKind.INTERVAL, TriggerKind.CRON) and start.due < self.started_at:
            reason = OVERDUE  # missed while no engine ran: once now, not a late tick, no back-fill
        interval = reason.kind is TriggerKind.INTERVAL
        lateness = max(0.0, (now - start.due) * 1000) if interval else 0.0
        if interval:
            self.stats.late(lateness)
        else:
            self.stats.dispatched(start.sense)
        self.log(logrows.run_start(start.sense, compute_id, reason, lateness_ms=round(lateness, 3)))
        if self.tracing is not None:
            group = self.config.senses[start.sense].group if start.sense in self.config.senses else "kernel"
            self.tracing.compute_started(start.sense, compute_id, reason, group)
        if self.report_computes:
            self.report("debug", f"compute {start.sense} #{compute_id} ({reason})")
        if start.sense == HEALTH_SENSE:
            self._compute_health(compute_id, reason)
            return
        if start.sense == THREADS_SENSE:
            self._compute_threads(compute_id, reason)
            return
        group = self.config.senses[start.sense].group
        supervisor = self.groups.get(group)
        sources = self.delivery.sources_for(start.sense)
        try:
            filters, bind = self._reads_with(start.sense, compute_id)
        except BindError as exc:  # a sense with parameters, started without values (nobody read it with them)
            self._record_error(start.sense, {"message": str(exc), "error_type": "BindError", "compute_id": compute_id})
            self._finish(start.sense, compute_id, reason, Outcome.ERROR, 0.0)
            return
        if supervisor is None or not supervisor.compute(compute_id, start.sense, reason, sources, filters, bind):
            self._record_error(start.sense, {"message": f"worker group={group} could not take the compute",
                                             "error_type": "WorkerUnavailable", "compute_id": compute_id})
            self._finish(start.sense, compute_id, reason, Outcome.ERROR, 0.0)
            self.delivery.failed(start.sense)

    def _reads_with(self, sense: str, compute_id: int) -> tuple[dict | None, dict | None]:
        """The bindings (values in place) and parameter values a compute of `sense` reads with."""
        reading = self.readings.get(sense)
        if reading is None or not reading.bindings:
            return None, None
        bind = self.reads.next_bind(sense) if reading.params else None
        filters = reading.filters(bind)  # BindError when nobody gave the values
        self.bound[compute_id] = binding_key(bind)
        return filters, bind

    # answers from workers (GroupHooks) ----------------------------------------
    def compute_answered(self, group: str, inflight: Inflight, message: protocol.Message) -> None:
        sense = inflight.sense
        duration = getattr(message, "duration_ms", 0.0)
        if inflight.cancelled:
            self._finish(sense, inflight.id, inflight.reason, Outcome.TIMEOUT, duration, discarded=True)
            self.delivery.failed(sense)
            return
        if self.reads.waiting(sense) and isinstance(message, (protocol.Signal, protocol.Silent)):
            self.launches.setdefault(inflight.id, {})["consumed"] = message.consumed  # for who asked for it
        for restart in getattr(message, "restarted", None) or ():  # committed with this compute's cursors
            self.log(logrows.cursor_restarted(sense, restart.get("source", "?"), int(restart.get("was_at") or 0),
                                              restart.get("identity_was"), restart.get("identity_now")))
            self.report("warn", f"{sense}: source {restart.get('source')} was rebuilt since its cursor (at "
                                f"{restart.get('was_at')}) was counted; it reads the new one from its start")
        if isinstance(message, protocol.Signal):
            self._log_skipped(sense, self.ledger.signal(sense, message.signal_id))
            # route first: the listeners become pending, and the pump inside _finish starts them
            self._route_signal(sense, message.payload, message.workflow, message.signal_id, message.ts, inflight.id)
            self._committed(sense)
            self.delivery.answered(sense, message.more)
            self._finish(sense, inflight.id, inflight.reason, Outcome.SIGNAL, duration,
                         signal_id=message.signal_id, events=message.events)
        elif isinstance(message, protocol.Silent):
            self.delivery.answered(sense, message.more)
            self._finish(sense, inflight.id, inflight.reason, Outcome.SILENT, duration, kept=message.kept,
                         events=message.events)
        elif isinstance(message, protocol.Error):
            info = message.error
            self._record_error(sense, {"message": info.message, "error_type": info.type,
                                       "traceback": info.traceback, "file": info.file, "line": info.line,
                                       "compute_id": inflight.id})
            self.delivery.failed(sense)
            self._finish(sense, inflight.id, inflight.reason, Outcome.ERROR, duration)

    def worker_died(self, group: str, computing: frozenset[str], evidence: Blame | None) -> Blame | None:
        return self.guards.worker_died(group, computing, evidence, time.time())

    def compute_output(self, group: str, message: protocol.Output) -> None:
        self.outputs.setdefault(message.id, []).append({"stream": message.stream, "text": message.text})
        if self.report_signals:
            where = "" if message.stream == "stdout" else " (stderr)"
            self.report("print", f"{message.sense} #{message.id}{where}: {message.text}")

    def compute_lost(self, group: str, inflight: Inflight, why: str, blame: Blame | None) -> None:
        if not inflight.cancelled:
            if blame is None:
                cause = ""
            elif blame.sense == inflight.sense:
                cause = f"; this sense is the likely cause: {blame.because}"
            else:
                cause = f"; likely caused by {blame.sense} ({blame.because}), not by this sense"
            detail = {"message": f"compute lost: {why}{cause}", "error_type": "WorkerDied", "compute_id": inflight.id,
                      "blamed": None if blame is None else blame.sense}
            if blame is not None and blame.sense == inflight.sense and blame.file is not None:
                detail.update(file=blame.file, line=blame.line)  # where its code crashed the worker
            self._record_error(inflight.sense, detail)
        # the worker may have died after its COMMIT, before answering: such a signal is real, log and route it
        self._log_skipped(inflight.sense, self.ledger.catch_up(inflight.sense))
        self.delivery.failed(inflight.sense)
        self._finish(inflight.sense, inflight.id, inflight.reason, Outcome.LOST, (time.time() - inflight.started) * 1000,
                     group=group, blame=blame)

    def _log_skipped(self, sense: str, signal_ids: list[int]) -> None:
        """Signals committed whose answer never came (the ledger logged them): their listeners still hear."""
        if signal_ids:
            self.report("warn", f"{sense}: {len(signal_ids)} committed signal(s) arrived without an answer; logged")
            self.scheduler.on_signal(sense, time.time())
            if self.fleet is not None:
                self.fleet.committed("sense", sense)
            self._committed(sense)

    def compute_timed_out(self, group: str, inflight: Inflight, timeout: float) -> None:
        grace = Policy.limits(self.config.senses.get(inflight.sense)).grace
        self._record_error(inflight.sense, {
            "message": f"compute exceeded its timeout of {timeout:g}s; result discarded "
                       f"(worker group={group} is killed if it still runs after {grace:g}s more)",
            "error_type": "TimeoutError", "compute_id": inflight.id})

    def worker_stderr(self, group: str, pid: int | None, line: str) -> None:
        """A line written outside any compute (an import-time print, the worker's own log)."""
        self.report("print", f"group={group} pid={pid}: {line}")

    def sense_load_failed(self, group: str, sense: str, info: protocol.ErrorInfo) -> None:
        self._record_error(sense, {"message": f"could not load: {info.message}", "error_type": info.type,
                                   "traceback": info.traceback, "file": info.file, "line": info.line})

    def group_event(self, group: str, row: LogRow) -> None:
        self.log(row)
        detail, event = row.payload or {}, row.kind
        if event is LogKind.WORKER_STARTED:
            again = f", restart {detail['restarts']}" if detail["restarts"] else ""
            senses = ", ".join(detail["senses"]) or "no senses"
            self.report("info", f"worker group={group} pid={detail['pid']} ready: {senses}{again}")
        elif event is LogKind.WORKER_EXITED:
            during = f" while computing {', '.join(detail['computing'])}" if detail["computing"] else ""
            blamed = detail.get("blamed")
            cause = f" (likely caused by {blamed['sense']}: {blamed['because']})" if blamed else ""
            self.report("warn", f"worker group={group} pid={detail['pid']} {detail['why']}{during}{cause}; "
                                f"respawning in {detail['respawn_in']:g}s")
        elif event is LogKind.WORKER_KILLED:
            self.report("error", f"killing worker group={group} pid={detail['pid']}: {detail['why']}")
        elif event is LogKind.MALFORMED:
            self.report("warn", f"worker group={group} pid={detail['pid']} wrote a malformed line: {detail['problem']}")

    async def peer_read(self, group: str, message: protocol.ReadPeer) -> str | None:
        return await requests.read_peer(self, group, message)

    def group_runnable(self, group: str, senses: set[str]) -> None:
        self.refresh_runnable(senses)

    def database_created(self, group: str, sense: str, why: str) -> None:
        """Said only of a sense that ran before: its rows and, as a listener, its cursors went with the old file."""
        state = self.scheduler.states.get(sense)
        if state is None or state.last_complete is None:
            return  # a new sense's first database
        path = self.layout.sense_db(sense)
        self.log(logrows.sense_db_created(sense, str(path), why, True))
        self.report("warn", f"{sense}: {why}; built again, empty, from its migrations ({path}); as a listener it "
                            "receives again every event its sources hold")

    def group_ready(self, group: str) -> None:
        supervisor = self.groups.get(group)
        if supervisor is not None:
            self.delivery.ready(supervisor.loaded, supervisor.takers)
        self.pump()

    def watchdog_breach(self, group: str, pid: int, problem: str, blame: Blame | None) -> None:
        """A worker over its limits is stopped, for the sense whose code used what broke them; when no sense's
        code can be named, the group counts one unexplained breach (too many quarantine all its senses)."""
        supervisor = self.groups[group]
        computing = sorted(i.sense for i in supervisor.inflight.values())
        self.log(logrows.watchdog_kill(group, pid, problem, computing,
                                       None if blame is None else {"sense": blame.sense, "because": blame.because}))
        during = f" while computing {', '.join(computing)}" if computing else " (idle)"
        named = f"; {blame.sense}: {blame.because}" if blame is not None else "; no sense's code can be named"
        self.report("error", f"watchdog: worker group={group} pid={pid} {problem}{during}{named}; stopping it")
        if blame is None:
            self.guards.unexplained_breach(group, list(supervisor.senses), problem, time.time())
        supervisor.kill_for(blame)

    # outcomes --------------------------------------------------------------
    def _finish(self, sense: str, compute_id: int, reason: Reason, outcome: Outcome, duration_ms: float,
                discarded: bool = False, group: str | None = None, blame: Blame | None = None,
                signal_id: int | None = None, kept: bool = False, events: int = 0) -> None:
        now = time.time()
        row = logrows.run_complete(sense, compute_id, outcome, reason, duration_ms=duration_ms, signal_id=signal_id,
                                   discarded=discarded, kept=kept, events=events)
        printed = self.outputs.pop(compute_id, None)
        if printed:
            self.log(logrows.output(sense, compute_id, printed))
        error = self.compute_errors.pop(compute_id, None)
        if self.tracing is not None:
            self.tracing.compute_finished(compute_id, outcome, error)
        if signal_id is not None:  # with its watermark, in one transaction (kernel.core.ledger)
            self.log(row, mark=self.ledger.signal_mark(sense, signal_id))
            self.ledger.logged(sense, signal_id)
        else:
            self.log(row)
        self.stats.finished(sense, outcome, duration_ms, now)
        if outcome.succeeded:  # kept in logs.db meta (one write per flush), so the metrics survive a restart
            self.logs.mark(SUCCESS_MARK + sense, int(now * 1000))
            if outcome is Outcome.SIGNAL:
                self.logs.mark(SIGNAL_MARK + sense, int(now * 1000))
        if outcome.succeeded and sense in self.errors:
            self.errors[sense]["last"] = self.errors[sense]["last_ts"] = None  # recovered; the log keeps the history
        if self.report_computes:
            self.report("debug", f"{sense} #{compute_id} {outcome} in {duration_ms:.1f}ms")
        self.scheduler.completed(sense, now)
        if sense not in BUILTIN_SENSES:
            self.guards.after_compute(sense, outcome, now, group=group, blame=blame)
        launched = self.launches.pop(compute_id, {})
        if self.reads.ended(sense, compute_id, self.bound.pop(compute_id, None),
                            {**(row.payload or {}), "output": printed or [], "error": error, **launched}):
            self.scheduler.trigger(sense, READ)  # someone waits for a compute of other parameter values
        self.pump()

    def _route_signal(self, sense: str, payload: Any, directive: str | None, signal_id: int | None = None,
                      ts: int | None = None, compute_id: int | None = None) -> None:
        if self.report_signals:
            self.report("signal", f"{sense}: {_short(payload)}")
        if self.tracing is not None:  # before the listeners are woken: their computes are children of this signal
            self.tracing.signalled(sense, compute_id, signal_id)
        if sense in self.freshness.expected and self.freshness.signalled(sense, time.time()):
            self.log(logrows.sense_fresh(sense, self.freshness.expected[sense]))
            self.report("info", f"{sense} signals again: fresh")
            self._trigger(HEALTH_SENSE, FRESHNESS)
            self._rearm_freshness()
        self.stats.signalled(self.scheduler.on_signal(sense, time.time()))
        if self.fleet is not None:  # (the fleet reads the row from the database when its id is not at hand)
            self.fleet.committed("sense", sense, signal_id, ts, payload)
        if directive and self.workflows is not None:
            thread = self.workflows.launch_directive(sense, directive)
            if compute_id is not None and self.reads.waiting(sense):  # someone waits for this compute: tell them
                self.launches.setdefault(compute_id, {}).update({"workflow": directive, "thread": thread})

    def _record_error(self, sense: str, detail: dict) -> None:
        if detail.get("compute_id") is not None:
            self.compute_errors[detail["compute_id"]] = {
                "type": detail.get("error_type") or "Error", "message": detail.get("message") or "",
                "traceback": detail.get("traceback") or "", "file": detail.get("file"), "line": detail.get("line")}
        self.log(logrows.error(sense, detail.get("message"), sense=sense,
                               **{k: v for k, v in detail.items() if k != "message"}))
        stats = self.errors.setdefault(sense, {"count": 0, "last": None, "last_ts": None})
        stats["count"] += 1
        stats["last"], stats["last_ts"] = detail.get("message"), time.time()
        self.recent_errors.append({"sense": sense, "message": detail.get("message"), "ts": now_ms()})
        del self.recent_errors[:-20]
        where = f" at {detail['file']}:{detail['line']}" if detail.get("file") else ""
        named = detail.get("error_type") and detail["error_type"] not in ("TimeoutError", "WorkerDied")
        kind = f"{detail['error_type']}: " if named else ""
        self.report("error", f"{sense}: {kind}{detail.get('message')}{where}")

    def _compute_health(self, compute_id: int, reason: Reason) -> None:
        """Build the payload here, write its row in a thread; the compute ends when the row is (or is not) stored."""
        started = time.perf_counter()
        payload = health_payload(self.started_at, self.scheduler, self.groups, self.recent_errors, len(self.warnings),
                                 self.freshness)
        stored = asyncio.get_running_loop().run_in_executor(None, self.health.record, payload)
        self._health_write = stored
        stored.add_done_callback(lambda f: self._health_stored(f, compute_id, reason, payload, started))

    def _health_stored(self, stored: asyncio.Future, compute_id: int, reason: Reason, payload: dict,
                       started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        self._health_write = None
        error = stored.exception()
        if error is None:  # a signal is a committed row, as for any sense
            self._route_signal(HEALTH_SENSE, payload, None, compute_id=compute_id)
            self._committed(HEALTH_SENSE)
            self._finish(HEALTH_SENSE, compute_id, reason, Outcome.SIGNAL, duration, signal_id=stored.result())
            return
        self._record_error(HEALTH_SENSE, {"message": f"could not store its signal in "
                                          f"{self.layout.sense_db(HEALTH_SENSE)}: {error}",
                                          "error_type": type(error).__name__, "compute_id": compute_id})
        self._finish(HEALTH_SENSE, compute_id, reason, Outcome.ERROR, duration)

    def _compute_threads(self, compute_id: int, reason: Reason) -> None:
        """Signal the thread transitions logged since the last compute (written in a thread)."""
        started = time.perf_counter()
        done = asyncio.get_running_loop().run_in_executor(None, self.threads_feed.feed)
        self._threads_write = done
        done.add_done_callback(lambda f: self._threads_stored(f, compute_id, reason, started))

    def _threads_stored(self, done: asyncio.Future, compute_id: int, reason: Reason, started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        self._threads_write = None
        error = done.exception()
        if error is not None:
            self._record_error(THREADS_SENSE, {"message": f"could not store its signals in "
                                               f"{self.layout.sense_db(THREADS_SENSE)}: {error}",
                                               "error_type": type(error).__name__, "compute_id": compute_id})
            self._finish(THREADS_SENSE, compute_id, reason, Outcome.ERROR, duration)
            return
        signals, more = done.result()
        if not signals:
            self._finish(THREADS_SENSE, compute_id, reason, Outcome.SILENT, duration)
            return
        for signal_id, payload in signals:  # one signal per transition; the listeners read them all by id
            self._route_signal(THREADS_SENSE, payload, None, signal_id, payload["at_ms"], compute_id=compute_id)
        self._committed(THREADS_SENSE)
        if more:
            self._trigger(THREADS_SENSE, BACKLOG)
        self._finish(THREADS_SENSE, compute_id, reason, Outcome.SIGNAL, duration, signal_id=signals[-1][0])

    # control socket ------------------------------------------------------------
    def _metrics_busy(self, connections: int, limit: int) -> None:
        if hasattr(self, "logs"):  # metrics listen before logs.db opens
            self.log(logrows.metrics_busy(connections, limit))
        self.report("warn", f"metrics: {limit} connections open, answering 503 to more until some close")

    def _control_busy(self, event: str, detail: dict) -> None:
        self.log(logrows.control_busy(detail["connections"], detail["limit"], detail["idle_timeout_s"]))
        self.report("warn", f"control socket: {detail['limit']} connections open, refusing more until some close "
                            f"(an idle one closes after {detail['idle_timeout_s']:g}s)")

    async def _handle_request(self, request: dict[str, Any]) -> dict[str, Any]:
        return await requests.handle(self, request)

    def lift_backoff(self, sense: str) -> None:
        self.scheduler.unblock(sense)

    def reset_sense(self, sense: str) -> bool:
        had = self.guards.reset(sense)
        self.pump()
        return had
    async def listener_backlogs(self) -> Snapshot:
        """Each listener's backlog per source, at most a second old (read from the files in a thread)."""
        loaded = set().union(*(s.loaded for s in self.groups.values()))
        return await self.listener_health.snapshot(listeners_of(self.config, self.home, self.delivery.takers, loaded))

    async def refresh_listener_health(self) -> None:
        """Each listener's backlog, counted again if the last count is over a second old (for a scrape)."""
        await self.listener_backlogs()

    def replayed(self, sense: str) -> None:
        """`nerve sense replay` moved a cursor of `sense` back: run it now if events wait beyond it."""
        self.delivery.check([sense], REPLAY)


    def demand(self, sense: str, bind: dict | None = None, reason: Reason = DEMAND) -> asyncio.Future:
        """Compute `sense` now (with `bind`'s parameter values); the future resolves when a compute started
        after this request (with the same values) ends."""
        future = asyncio.get_running_loop().create_future()
        self.reads.add(sense, self.next_id, bind, future)
        self.scheduler.trigger(sense, reason)
        self.pump()
        return future

    def sources_for(self, sense: str) -> dict[str, str] | None:
        """A sense's `on:` sources, eager and lazy: what its computes read."""
        return self.delivery.sources_for(sense)

    def emit(self, channel: str, payload: Any, key: str | None = None, via: str | None = None,
             traceparent: str | None = None, schema_version: Any = None, hashed: bool = False) -> asyncio.Future:
        """Store an external event durably; resolves to (StoredEvent, woken senses) once it is committed.
        `via`: how it arrived when not by `nerve emit`, the socket or MCP ("webhook"); `schema_version` and
        `hashed`: what its emitter asked for (store.events.new_event); `traceparent`: the W3C trace context it
        came with (its span's parent, when traces are on)."""
        return self.emits.emit(channel, payload, key, via=via, schema_version=schema_version, hashed=hashed,
                               traceparent=traceparent)

    async def _thread_emit(self, channel: str, payload: Any, key: str | None) -> tuple[int, bool, list[str]]:
        """An event a workflow thread's role emits: stored and routed like any emit."""
        event, woken = await self.emit(channel, payload, key)
        return event.id, event.duplicate, woken

    def _route_events(self, stored: list[tuple[Any, Any]]) -> list[list[str]]:
        """Committed events (EmitDesk): log each, wake its listeners, then start them."""
        woken = []
        now = time.time()
        for event, payload in stored:
            if self.tracing is not None:  # before its listeners are woken: their computes are its children
                self.tracing.emitted(event.channel, event.id, event.origin, event.traceparent)
            if event.origin is None and self.fleet is not None:
                self.fleet.committed("channel", event.channel, event.id, event.ts, payload)
            if self.ledger.routing(event.id):  # once: a catch-up may have logged it since its commit
                self.log(logrows.emit(event.channel, payload, event.id, origin=event.origin, via=event.via,
                                      schema_version=event.schema_version, hash=event.hash),
                         event.ts, self.ledger.event_mark(event.id))
                self.ledger.event_logged(event.id)
            self.stats.event(event.channel)
            if self.report_signals:
                self.report("signal", f"emit {event.channel} #{event.id}: {_short(payload)}")
            targets = self.scheduler.on_signal(event.channel, now)
            self.stats.signalled(targets)
            woken.append(targets)
        for channel in {event.channel for event, _ in stored}:
            self._committed(channel)
        self.pump()
        return woken

    def events_stored(self, channel: str | None) -> int:
        """Events stored without this engine (an offline `nerve emit` racing its start): log, wake listeners."""
        logged = self.ledger.catch_up_events()
        if self.fleet is not None:
            self.fleet.committed_offline(channel)
        self.delivery.check([s for s, src in self.delivery.sources.items() if channel is None or channel in src],
                            BACKLOG)
        self._committed(channel)
        return logged

    def _committed(self, source: str | None) -> None:
        """Events of `source` are committed (None: of some channel): threads waiting for one read them."""
        if self.workflows is not None:
            self.workflows.events_committed(source)

    def _trigger(self, sense: str, reason: Reason) -> None:
        if not self.stopping and self.scheduler.trigger(sense, reason):
            self.pump()


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _short(value: Any, limit: int = 120) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exposed_metrics(address: ListenAddress) -> str:
    """The warning for metrics served beyond this machine."""
    return (f"metrics on {address} can be read from other machines: they name your senses, workflows, channels "
            "and models; listen on 127.0.0.1 (--metrics 127.0.0.1:PORT) or put a firewall or an authenticating "
            "proxy in front")
