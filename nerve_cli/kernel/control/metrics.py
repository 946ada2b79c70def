"""`nerve run --metrics HOST:PORT` (or engine.metrics): what the engine's counters and state read as metrics.

`EngineCollector` turns the engine into Prometheus families when scraped; the
HTTP side (metrics_http) answers on the engine's own event loop, so a scrape
reads the engine's state between two events (never mid-update, no thread) and
an idle engine has nothing extra waking up. prometheus-client is imported only
here, only when metrics are asked for. docs/reference/metrics.md lists every family.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any, Iterator, Protocol

import psutil
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from nerve_cli import __version__, eventloop
from nerve_cli.config.model import PRIORITIES
from nerve_cli.kernel.control.snapshot import Snapshot
from nerve_cli.kernel.core.stats import Histogram
from nerve_cli.kernel.notify.edge import notify_metrics
from nerve_cli.vocab.states import SenseStatus, WorkerState


def _run_seconds(pid: int) -> float:
    """CPU time of a process's live threads at ns precision (Linux schedstat; 0.0 elsewhere).

    /proc/PID/stat counts in 10 ms ticks: a worker forked warm that has run a
    few short computes has used less than one tick and would show 0.
    """
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as stat:
                total += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9


class Observed(Protocol):
    """The running engine, as a scrape reads it (never changes it): a typed snapshot, taken per scrape."""

    def snapshot(self) -> Snapshot: ...

    async def refresh_listener_health(self) -> None: ...


class EngineCollector:
    """Reads the engine when scraped: counters from EngineStats, gauges from the live state."""

    def __init__(self, engine: Observed) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        snap = self.engine.snapshot()
        yield from self._build()
        for family in (self._computes, self._last_times, self._timing, self._queues, self._events, self._workers,
                       self._threads, self._models):
            yield from family(snap)
        if snap.fleet is not None:
            yield from fleet_metrics(snap.fleet)
        yield from self._listeners(snap)
        yield from self._agents(snap)
        yield from self._webhooks(snap)
        yield from notify_metrics(snap.notify)
        yield from self._freshness(snap)
        yield from self._causal(snap)

    def _build(self) -> Iterator[Metric]:
        yield InfoMetricFamily("nerve_build", "The running Nerve: its version, Python and event loop.",
                               value={"version": __version__, "python": platform.python_version(),
                                      "loop": self._loop})

    @property
    def _loop(self) -> str:
        try:
            return eventloop.name()
        except RuntimeError:  # scraped outside the engine's loop (a test's direct collect)
            return "unknown"

    def _computes(self, snap: Snapshot) -> Iterator[Metric]:
        stats = snap.stats
        computes = CounterMetricFamily("nerve_computes", "Computes finished, by sense and outcome "
                                       "(signal, silent, error, timeout, lost).", labels=["sense", "outcome"])
        for (sense, outcome), count in sorted(stats.computes.items()):
            computes.add_metric([sense, outcome], count)
        yield computes
        durations = HistogramMetricFamily("nerve_compute_duration_seconds", "How long computes took, by sense.",
                                          labels=["sense"])
        for sense, hist in sorted(stats.durations.items()):
            durations.add_metric([sense], hist.cumulative(), hist.sum)
        yield durations
        errors = CounterMetricFamily("nerve_errors", "Errors recorded, by sense.", labels=["sense"])
        for sense, entry in sorted(snap.errors.items()):
            errors.add_metric([sense], entry.count)
        yield errors

    def _last_times(self, snap: Snapshot) -> Iterator[Metric]:
        """When each sense last succeeded and last signalled (kept across restarts), and its interval."""
        stats, states = snap.stats, {name: view.state for name, view in snap.senses.items()}
        success = GaugeMetricFamily("nerve_sense_last_success_timestamp_seconds", "When each sense's last compute "
                                    "that succeeded (a signal, or silent) ended, unix seconds.", labels=["sense"])
        signal = GaugeMetricFamily("nerve_sense_last_signal_timestamp_seconds", "When each sense last signalled, "
                                   "unix seconds.", labels=["sense"])
        interval = GaugeMetricFamily("nerve_sense_interval_seconds", "Each sense's shortest interval reflex "
                                     "(0: it runs only on signals, cron or demand).", labels=["sense"])
        for name, state in sorted(states.items()):
            if name in stats.last_success:
                success.add_metric([name], stats.last_success[name])
            if name in stats.last_signal:
                signal.add_metric([name], stats.last_signal[name])
            interval.add_metric([name], state.interval or 0.0)
        yield from (success, signal, interval)

    def _events(self, snap: Snapshot) -> Iterator[Metric]:
        events = CounterMetricFamily("nerve_events", "External events stored, by channel (nerve emit, the "
                                     "control socket's emit).", labels=["channel"])
        for channel, count in sorted(snap.stats.events.items()):
            events.add_metric([channel], count)
        yield events

    def _models(self, snap: Snapshot) -> Iterator[Metric]:
        stats = snap.stats
        calls = CounterMetricFamily("nerve_model_calls", "Model calls answered for workflow roles (llm_role), "
                                    "by model.", labels=["model"])
        for model, count in sorted(stats.model_calls.items()):
            calls.add_metric([model], count)
        tokens = CounterMetricFamily("nerve_model_tokens", "Tokens of those calls, by model and type (input, "
                                     "output), as the model reported them.", labels=["model", "type"])
        for (model, kind), count in sorted(stats.tokens.items()):
            tokens.add_metric([model, kind], count)
        yield from (calls, tokens)

    def _timing(self, snap: Snapshot) -> Iterator[Metric]:
        stats = snap.stats
        yield _histogram("nerve_interval_lateness_seconds", "How late interval computes started after their due time.",
                         stats.lateness)
        yield _histogram("nerve_hop_seconds", "From a signal reaching the kernel to its listener's compute being sent.",
                         stats.hop)
        waits = HistogramMetricFamily("nerve_compute_queue_wait_seconds", "How long computes waited in their group's "
                                      "queue (groups.G.concurrency), by priority.", labels=["priority"])
        for level, hist in sorted(stats.queue_wait.items()):
            waits.add_metric([level], hist.cumulative(), hist.sum)
        yield waits
        yield GaugeMetricFamily("nerve_uptime_seconds", "Seconds since the engine started.",
                                value=time.time() - snap.started_at)

    def _queues(self, snap: Snapshot) -> Iterator[Metric]:
        states = {name: view.state for name, view in snap.senses.items()}
        yield GaugeMetricFamily("nerve_computes_pending", "Senses with a compute waiting to start.",
                                value=snap.pending)
        yield GaugeMetricFamily("nerve_computes_running", "Computes running now.",
                                value=sum(1 for s in states.values() if s.running))
        yield GaugeMetricFamily("nerve_log_rows_buffered", "Log rows waiting for the next batch commit.",
                                value=snap.log_rows_buffered)
        blocked = GaugeMetricFamily("nerve_senses_blocked", "Senses held back, by why (penalised, quarantined, "
                                    "paused).", labels=["state"])
        for state in (SenseStatus.PENALISED, SenseStatus.QUARANTINED):
            blocked.add_metric([state], sum(1 for s in states.values() if s.blocked_until
                                            and s.quarantined == (state is SenseStatus.QUARANTINED)))
        blocked.add_metric([SenseStatus.PAUSED], sum(1 for s in states.values() if s.paused))
        queued = GaugeMetricFamily("nerve_computes_queued", "Computes waiting in their group's queue (groups.G."
                                   "concurrency), by priority.", labels=["priority"])
        for level in PRIORITIES:
            queued.add_metric([level], sum(1 for s in states.values() if s.queued_priority == level))
        yield queued
        yield blocked
        pressure = CounterMetricFamily("nerve_triggers_merged", "Triggers merged into another compute, by sense and "
                                       "how (coalesced, deferred, debounced, skipped).", labels=["sense", "how"])
        for name, s in sorted(states.items()):
            for how in ("coalesced", "deferred", "debounced", "skipped"):
                if getattr(s, how):
                    pressure.add_metric([name, how], getattr(s, how))
        yield pressure

    def _workers(self, snap: Snapshot) -> Iterator[Metric]:
        up = GaugeMetricFamily("nerve_worker_up", "1 when the group's worker is ready.", labels=["group"])
        rss = GaugeMetricFamily("nerve_worker_resident_memory_bytes", "Resident memory of each worker.",
                                labels=["group"])
        cpu = CounterMetricFamily("nerve_worker_cpu_seconds", "CPU time (user + system) of the current worker "
                                  "process of each group.", labels=["group"])
        restarts = CounterMetricFamily("nerve_worker_restarts", "Times each group's worker was respawned.",
                                       labels=["group"])
        inflight = GaugeMetricFamily("nerve_worker_inflight", "Computes sent to each worker and not yet answered.",
                                     labels=["group"])
        for group, sup in sorted(snap.workers.items()):
            up.add_metric([group], 1 if sup.state is WorkerState.READY else 0)
            restarts.add_metric([group], sup.restarts)
            inflight.add_metric([group], sup.inflight)
            pid = sup.pid
            if pid:
                try:
                    proc = psutil.Process(pid)
                    with proc.oneshot():
                        rss.add_metric([group], proc.memory_info().rss)
                        times = proc.cpu_times()
                        cpu.add_metric([group], max(times.user + times.system, _run_seconds(pid)))
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
        yield from (up, rss, cpu, restarts, inflight)

    def _threads(self, snap: Snapshot) -> Iterator[Metric]:
        threads = GaugeMetricFamily("nerve_threads", "Workflow threads by workflow and status.",
                                    labels=["workflow", "status"])
        queue = GaugeMetricFamily("nerve_workflow_queue_depth", "Thread requests waiting for a slot.",
                                  labels=["workflow"])
        for name, info in sorted(snap.workflows.items()):
            for status, count in sorted(info["counts"].items()):
                threads.add_metric([name, status], count)
            queue.add_metric([name], len(info["queued"]))
        durations = HistogramMetricFamily("nerve_thread_duration_seconds", "Workflow threads from their start to "
                                          "their end (waits for a person included), by workflow.", labels=["workflow"])
        for name, hist in sorted(snap.stats.thread_durations.items()):
            durations.add_metric([name], hist.cumulative(), hist.sum)
        waiting = GaugeMetricFamily("nerve_thread_oldest_waiting_seconds", "How long the longest-waiting thread of "
                                    "each workflow has waited for a person (0: none waits).", labels=["workflow"])
        now_ms = time.time() * 1000
        for name, since in sorted(snap.oldest_waiting.items()):
            waiting.add_metric([name], 0.0 if since is None else max(0.0, (now_ms - since) / 1000))
        yield from (threads, queue, durations, waiting)


    def _listeners(self, snap: Snapshot) -> Iterator[Metric]:
        """What waits for each listener, per source (the snapshot the scrape refreshed, at most a second old)."""
        events = GaugeMetricFamily("nerve_listener_backlog_events", "Events stored for a listener and not consumed "
                                   "yet, by listener and source.", labels=["sense", "source"])
        age = GaugeMetricFamily("nerve_listener_backlog_oldest_age_seconds", "Age of the oldest event waiting for a "
                                "listener (0 when none waits), by listener and source.", labels=["sense", "source"])
        now = time.time() * 1000
        for sense, found in sorted(snap.backlogs.items()):
            for b in found:
                events.add_metric([sense, b.source], b.events)
                age.add_metric([sense, b.source], max(0.0, (now - b.oldest_ts) / 1000) if b.oldest_ts else 0.0)
        yield events
        yield age


    def _agents(self, snap: Snapshot) -> Iterator[Metric]:
        """What waits for each agent (agents: in nerve.yaml), as `nerve agent list` counts it."""
        events = GaugeMetricFamily("nerve_agent_backlog_events", "Events an agent has not acknowledged: heard and "
                                   "not handed, handed and pending, or not yet heard from its sources.", labels=["agent"])
        pending = GaugeMetricFamily("nerve_agent_pending_deliveries", "Deliveries handed to an agent and not "
                                    "acknowledged yet.", labels=["agent"])
        age = GaugeMetricFamily("nerve_agent_backlog_oldest_age_seconds", "Age of the oldest event an agent has not "
                                "acknowledged (0 when none).", labels=["agent"])
        now = time.time() * 1000
        for agent, found in sorted(snap.agents.items()):
            events.add_metric([agent], found.events)
            pending.add_metric([agent], found.deliveries)
            age.add_metric([agent], max(0.0, (now - found.oldest_ts) / 1000) if found.oldest_ts else 0.0)
        yield from (events, pending, age)

    def _freshness(self, snap: Snapshot) -> Iterator[Metric]:
        stale = GaugeMetricFamily("nerve_sense_stale", "1 while a sense has not signalled within its "
                                  "expect_signal_every, else 0 (senses with that key only).", labels=["sense"])
        for sense in sorted(snap.freshness):
            stale.add_metric([sense], 1 if sense in snap.stale else 0)
        yield stale

    def _causal(self, snap: Snapshot) -> Iterator[Metric]:
        refused = CounterMetricFamily("nerve_causal_refusals", "Directives and emits refused past their causal depth "
                                      "bound (engine.max_causal_depth, or a reflex's max_depth), by what was "
                                      "refused.", labels=["what"])
        by_what = snap.causal.get("by_what") or {}
        for what in ("directive", "emit", "publish"):
            refused.add_metric([what], by_what.get(what, 0))
        yield refused
        yield GaugeMetricFamily("nerve_causal_refused_chains", "Chains of causes refused at least once since the "
                                "engine started (each logged once).", value=snap.causal.get("chains", 0))

    def _webhooks(self, snap: Snapshot) -> Iterator[Metric]:
        if snap.webhooks_url is None:
            return
        answered = CounterMetricFamily("nerve_webhook_requests", "Webhook posts answered, by channel and HTTP status "
                                       "(channel \"\" for posts to no open channel).", labels=["channel", "code"])
        for (channel, code), count in sorted(snap.webhook_counts.items()):
            answered.add_metric([channel, str(code)], count)
        yield answered


def fleet_metrics(fleet: dict[str, Any]) -> Iterator[Metric]:
    """This host in its fleet: the link, the outbox, and what each subscription received and still lags."""
    yield GaugeMetricFamily("nerve_fleet_connected", "1 while connected to a NATS server with the stream ready.",
                            value=1 if fleet["connected"] else 0)
    yield GaugeMetricFamily("nerve_fleet_outbox_events", "Signals and emits committed here that the NATS server has "
                            "not acknowledged yet.", value=fleet["outbox"])
    yield CounterMetricFamily("nerve_fleet_published", "Signals and emits published and acknowledged since the "
                              "engine started.", value=fleet["published"])
    yield CounterMetricFamily("nerve_fleet_not_sent", "Payloads larger than the server's max_payload, skipped.",
                              value=fleet["not_sent"])
    yield CounterMetricFamily("nerve_fleet_connections", "Connections made to a NATS server since the engine "
                              "started (more than 1: it was lost and made again).", value=fleet["connections"])
    received = CounterMetricFamily("nerve_fleet_received", "Events received from the fleet and committed here, by "
                                   "subscription.", labels=["source"])
    duplicates = CounterMetricFamily("nerve_fleet_duplicates", "Events handed over again and dropped by their key, "
                                     "by subscription.", labels=["source"])
    lag = GaugeMetricFamily("nerve_fleet_subscription_lag", "Messages the server holds for this host and has not "
                            "had acknowledged, by subscription.", labels=["source"])
    for sub in fleet["subscriptions"]:
        received.add_metric([sub["source"]], sub["received"])
        duplicates.add_metric([sub["source"]], sub["duplicates"])
        if sub["lag"] is not None:
            lag.add_metric([sub["source"]], sub["lag"])
    yield from (received, duplicates, lag)


def _histogram(name: str, doc: str, hist: Histogram) -> Metric:
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], hist.cumulative(), hist.sum)
    return family


def registry(engine: Observed) -> CollectorRegistry:
    """The engine's families and the kernel process's own (CPU, memory, open files: nerve_kernel_process_*)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(EngineCollector(engine))
    ProcessCollector(namespace="nerve_kernel", pid=lambda: os.getpid(), registry=found)
    return found
