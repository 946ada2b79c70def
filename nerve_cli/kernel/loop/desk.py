"""The running engine as its edges see it: the control requests, hot reload, the metrics and the webhooks.

The desk holds no state of its own: it reads the loop's parts and forwards
the actions an edge may take (compute, emit, replay, reset, a new config) to
the part that owns them. An edge never reaches past it into a part's fields.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nerve_cli.config.model import NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.control.snapshot import SenseView, Snapshot, WorkerView
from nerve_cli.kernel.core.agent_health import AgentHealth
from nerve_cli.kernel.core.causes import Cause, Causes
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.listeners import ListenerHealth, listeners_of
from nerve_cli.kernel.core.listeners import Snapshot as Backlogs
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import EngineStats
from nerve_cli.kernel.loop.current import Current
from nerve_cli.kernel.loop.edges import FileEdge, FleetEdge
from nerve_cli.kernel.loop.freshness import FreshnessWatch
from nerve_cli.kernel.loop.outcomes import Outcomes
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.watchdog import Watchdog
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.events import EventError
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import CODE_CHANGED, DEMAND, REPLAY, Reason

if TYPE_CHECKING:
    from nerve_cli.config.projection import Reading
    from nerve_cli.kernel.core.scheduler import SenseState
    from nerve_cli.kernel.supervision.supervisor import GroupSupervisor


class Desk:
    def __init__(self, home: Path, layout: Layout, current: Current, started_at: float, scheduler: Scheduler,
                 outcomes: Outcomes, groups: Groups, delivery: Delivery, emits: EmitDesk, stats: EngineStats,
                 logs: LogStore, log: Log, report: Report, freshness: FreshnessWatch, guards: Guards,
                 watchdog: Watchdog, workflows: WorkflowManager | None, fleet: FleetEdge, files: FileEdge) -> None:
        self.home = home
        self.layout = layout
        self.current = current
        self.started_at = started_at
        self.scheduler = scheduler
        self.outcomes = outcomes
        self.processes = groups
        self.delivery = delivery
        self.emits = emits
        self.stats = stats
        self.logs = logs
        self.log = log
        self.report = report
        self.freshness_watch = freshness
        self.guards = guards
        self.watchdog = watchdog
        self.workflows = workflows
        self.fleet_edge = fleet
        self.files = files
        self.listener_health = ListenerHealth(home)
        self.agent_health = AgentHealth(home)
        self.webhooks: Any = None  # kernel.ingress.webhooks.WebhookServer once it listens
        self.notifier: Any = None  # kernel.notify.notifier.Notifier: `notify:` rules through apprise
        self.console: Any = None  # kernel.ingress.console.Console when engine.ui runs the web console
        self.tracing: Any = None  # kernel.trace.spans.Tracing when traces are on

    # what the edges read ---------------------------------------------------------
    @property
    def config(self) -> NerveConfig:
        return self.current.config

    @property
    def warnings(self) -> list[str]:
        return self.current.warnings

    @warnings.setter
    def warnings(self, value: list[str]) -> None:
        self.current.warnings = value

    @property
    def fleet(self) -> Any:
        return self.fleet_edge.fleet

    def snapshot(self) -> Snapshot:
        """The whole engine as now (status, a scrape, a health signal)."""
        workers = {s.group: _worker(s) for s in self.processes}
        freshness = self.freshness_watch.freshness
        return Snapshot(
            home=self.home, pid=os.getpid(), started_at=self.started_at,
            senses={name: self._view(name, state, workers) for name, state in self.scheduler.states.items()},
            workers=workers, pending=self.scheduler.pending_count(), log_rows_buffered=self.logs.pending(),
            channels=sorted(self.config.external_channels()), warnings=list(self.current.warnings),
            enabled=frozenset(self.config.enabled_senses()), errors=self.outcomes.errors.views(),
            recent_errors=list(self.outcomes.errors.recent), stats=self.stats,
            workflows=self.workflows.status() if self.workflows is not None else {},
            oldest_waiting=self.workflows.oldest_waiting() if self.workflows is not None else {},
            fleet=self.fleet.status() if self.fleet is not None else None,
            traces=self.tracing.status() if self.tracing is not None else None,
            webhooks_url=self.webhooks.url if self.webhooks is not None else None,
            notify=self.notifier.status() if self.notifier is not None else {},
            webhook_counts=dict(self.webhooks.counts) if self.webhooks is not None else {},
            backlogs=dict(self.listener_health.last), agents=dict(self.agent_health.last),
            freshness=dict(freshness.expected),
            stale=dict(freshness.stale),
            causal={"max_depth": self.config.engine.max_causal_depth, **self.causes.status()})

    def sense(self, name: str) -> SenseView | None:
        """One sense the engine schedules, as now (None: no such enabled sense)."""
        state = self.scheduler.states.get(name)
        if state is None:
            return None
        supervisor = self.processes.for_sense(name)
        return self._view(name, state, {supervisor.group: _worker(supervisor)} if supervisor is not None else {})

    def senses(self) -> list[str]:
        """The senses the engine schedules (enabled ones and the built-ins)."""
        return list(self.scheduler.states)

    def reading(self, sense: str) -> Reading | None:
        """How `sense` reads its `on:` sources (None: it has none)."""
        return self.current.readings.get(sense)

    def _view(self, name: str, state: SenseState, workers: dict[str, WorkerView]) -> SenseView:
        settings = self.config.senses.get(name)
        group = settings.group if settings is not None else "kernel"
        supervisor = self.processes.get(group) if settings is not None else None
        load_error = supervisor.failed.get(name) if supervisor is not None else None
        freshness = self.freshness_watch.freshness
        return SenseView(
            name=name, group=group, state=state,
            next_due=None if load_error is not None else self.scheduler.next_due(name),  # it cannot run: not due
            errors=self.outcomes.errors.view(name), load_error=load_error,
            load_failed_since=supervisor.failed_since.get(name) if supervisor and load_error else None,
            worker=workers.get(group), expect_signal_every=freshness.expected.get(name),
            stale_since=freshness.stale.get(name))

    # actions ---------------------------------------------------------------------
    def pump(self) -> None:
        self.outcomes.pump()

    def demand(self, sense: str, bind: dict | None = None, reason: Reason = DEMAND) -> asyncio.Future:
        return self.outcomes.demand(sense, bind, reason)

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

    async def thread_emit(self, channel: str, payload: Any, key: str | None,
                          cause: Cause | None = None) -> tuple[int, bool, list[str]]:
        """An event a workflow thread's role emits: stored and routed like any emit, unless its `cause` is past
        the causal depth bound (EventError)."""
        if cause is not None and not self.causes.admit("emit", channel, cause):
            raise EventError(f"emit to {channel} refused: causal depth {cause.depth} is past the bound of "
                             f"{self.current.causal_bound(None)} (engine.max_causal_depth)")
        event, woken = await self.emits.emit(channel, payload, key, cause=cause)
        return event.id, event.duplicate, woken

    @property
    def causes(self) -> Causes:
        """Each item's causal depth, and the refusals (kernel.core.causes)."""
        return self.outcomes.router.causes

    def events_stored(self, channel: str | None) -> int:
        """Events stored without this engine (an offline `nerve emit` racing its start): log, wake listeners."""
        return self.outcomes.router.offline(channel)

    async def listener_backlogs(self) -> Backlogs:
        """Each listener's backlog per source, at most a second old (read from the files in a thread)."""
        listeners = listeners_of(self.config, self.home, self.delivery.takers, self.processes.loaded())
        return await self.listener_health.snapshot(listeners)

    def control_busy(self, event: str, detail: dict) -> None:
        """The control socket refuses connections past its cap (said once per siege)."""
        self.log(logrows.control_busy(detail["connections"], detail["limit"], detail["idle_timeout_s"]))
        self.report("warn", f"control socket: {detail['limit']} connections open, refusing more until some close "
                            f"(an idle one closes after {detail['idle_timeout_s']:g}s)")

    async def agent_backlogs(self) -> dict[str, Any]:
        """Each agent's backlog (store.inbox.AgentBacklog), at most a second old (read from the files in a thread)."""
        return await self.agent_health.refresh(self.config)

    async def refresh_listener_health(self) -> None:
        """Each listener's and agent's backlog, counted again if the last count is over a second old (a scrape)."""
        await self.listener_backlogs()
        await self.agent_health.refresh(self.config)

    def replayed(self, sense: str) -> None:
        """`nerve sense replay` moved a cursor of `sense` back: run it now if events wait beyond it."""
        self.delivery.check([sense], REPLAY)

    def lift_backoff(self, sense: str) -> None:
        self.scheduler.unblock(sense)

    def reset_sense(self, sense: str) -> bool:
        had = self.guards.reset(sense)
        self.outcomes.pump()
        return had

    def pause_senses(self, senses: list[str], paused: bool, by: str, via: str | None) -> list[dict[str, Any]]:
        done = self.guards.pauses.set(senses, paused, by, via)
        self.logs.flush()  # a pause must outlive a kill right after its answer
        self.outcomes.pump()  # a resumed sense's waiting trigger starts now
        return done

    # hot reload (reload.Target) --------------------------------------------------
    def use_config(self, config: NerveConfig) -> None:
        self.current.use(config)
        # a sense that joins keeps its rhythm from disk, like at start-up (the log store keeps every
        # sense's last completion in memory: no query here); cron times count from now
        completions = {k: v / 1000 for k, v in self.logs.last_completions().items()}
        self.scheduler.apply_config(config, completions, now=time.time(), extra_senses=config.kernel_senses())
        self.outcomes.refresh_runnable(list(self.scheduler.states))  # senses may have joined or changed group
        self.delivery.apply_config(config)  # changed on: lists: a new source's waiting events are delivered
        self.files.apply_config(config)
        self.freshness_watch.apply_config(config)
        self.fleet_edge.apply_config(config)

    def code_changed(self, senses: list[str]) -> None:
        for sense in senses:
            self.outcomes.trigger(sense, CODE_CHANGED)

    def link_base(self) -> str | None:
        """`http://HOST:PORT` of the listener answer links are served on (None: no webhooks listener)."""
        return self.webhooks.url.rsplit("/emit/", 1)[0] if self.webhooks is not None else None

    def config_applied(self) -> None:
        if self.notifier is not None:
            self.notifier.wake()  # notify: rules apply at its next look
        if self.workflows is not None:
            self.workflows.update_config(self.config)
        self.guards.update_config(self.config.engine)
        self.watchdog.update()


def _worker(supervisor: GroupSupervisor) -> WorkerView:
    worker = supervisor.worker
    return WorkerView(supervisor.group, supervisor.state, worker.pid if worker else None, supervisor.restarts,
                      len(supervisor.inflight), supervisor.last_exit, supervisor.describe())
