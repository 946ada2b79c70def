"""The signal bus: a committed signal or event, fanned out to every part that hears it, in one place.

Whatever is routed here is already durable (a sense's `_signals` row, an
events.db row): the bus only tells. In order, for each signal or event:

1. traces: its span, before any listener wakes (their computes are its children);
2. freshness: a stale sense that signals is fresh again (nerve-health is told);
3. the ledger: an event's log row, once (a catch-up may have written it);
4. the scheduler: its listeners become pending (and the counters count them);
5. the fleet: a published subject goes to the outbox;
6. a directive: the thread a sense's signal asks for;
then, once per source of the batch, the workflows' waits read what was committed,
and each `Subscriber` hears every item, last (an agent inbox, a notifier: a new
edge is a subscriber, added with `subscribe`).

The router never starts a compute: its caller pumps once the batch is routed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from nerve_cli.kernel.core.causes import Cause, Causes, world
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import EngineStats
from nerve_cli.kernel.loop.freshness import FreshnessWatch
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.names import hears
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import BACKLOG
from nerve_cli.vocab.sources import SourceKind

if TYPE_CHECKING:
    from nerve_cli.kernel.fleet.service import Fleet
    from nerve_cli.kernel.trace.spans import Tracing
    from nerve_cli.store.events import StoredEvent


@dataclass(frozen=True)
class Committed:
    """One signal or event, committed. `id`, `ts` and `payload` are None when the router does not have them
    at hand (a catch-up logged them from the files: read them there, after your cursor); `source` is None for
    events stored on some channel without the engine."""

    kind: SourceKind
    source: str | None
    id: int | None = None
    ts: int | None = None
    payload: Any = None  # a value, or an orjson.Fragment of the stored JSON
    origin: str | None = None  # the fleet host it came from (an event received from another host)
    compute_id: int | None = None  # the compute whose signal it is


class Subscriber(Protocol):
    """A part that hears every committed signal and event, after the engine's own parts did."""

    def committed(self, item: Committed) -> None: ...


class Router:
    def __init__(self, scheduler: Scheduler, ledger: Ledger, delivery: Delivery, freshness: FreshnessWatch,
                 stats: EngineStats, log: Log, report: Report, *, workflows: WorkflowManager | None = None,
                 tracing: Tracing | None = None, report_signals: bool = False, causes: Causes | None = None) -> None:
        self.scheduler = scheduler
        self.ledger = ledger
        self.delivery = delivery
        self.freshness = freshness
        self.stats = stats
        self.log = log
        self.report = report
        self.workflows = workflows
        self.tracing = tracing
        self.fleet: Fleet | None = None  # while this host is in a fleet (set and unset by the fleet's part)
        self.report_signals = report_signals  # don't format lines nobody sees
        self.subscribers: list[Subscriber] = []
        # each item's causal depth: its listeners become as deep (kernel.core.causes)
        self.causes = causes if causes is not None else Causes(lambda _: 1 << 30, log, report)

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)

    # signals -----------------------------------------------------------------------
    def signals(self, sense: str, signals: Iterable[tuple[int | None, Any, int | None]],
                directive: str | None = None, compute_id: int | None = None,
                causes: list[Cause] | None = None) -> dict | None:
        """A compute of `sense` committed `signals` [(signal id, payload, ts)] (`causes`: each one's, when
        they are not the compute's); returns the thread its directive started, if any."""
        now = time.time()
        items = []
        thread = None
        cause = self.causes.signalled(sense, compute_id)
        for n, (signal_id, payload, ts) in enumerate(signals):
            if causes is not None:
                cause = self.causes.source(sense, causes[n])
            if self.report_signals:
                self.report("signal", f"{sense}: {short(payload)}")
            if self.tracing is not None:  # before the listeners are woken: their computes are children of this
                self.tracing.signalled(sense, compute_id, signal_id)
            self.freshness.signalled(sense)
            targets = self.scheduler.on_signal(sense, now)
            self.causes.woke(targets, cause, sense, signal_id)
            self.stats.signalled(targets)
            if self.fleet is not None:  # (the fleet reads the row from the database when its id is not at hand)
                self.fleet.committed(SourceKind.SENSE, sense, signal_id, ts, payload)
            if directive and self.workflows is not None:
                thread = self._directive(sense, directive, cause)
            items.append(Committed(SourceKind.SENSE, sense, signal_id, ts, payload, compute_id=compute_id))
        self._settled(sense, items)
        return thread

    def _directive(self, sense: str, directive: str, cause: Cause) -> dict:
        """The thread a signal's directive asks for: as deep as the signal, refused past the sense's bound."""
        assert self.workflows is not None
        workflow = directive.split("|", 1)[0].strip() if isinstance(directive, str) else "?"
        started = cause.via(f"workflow {workflow}")
        if not self.causes.admit("directive", f"workflow {workflow}", started, sense):
            return {"run_id": None, "status": "refused", "reason": "causal depth"}
        return self.workflows.launch_directive(sense, directive, started)

    def skipped(self, sense: str, signal_ids: list[int]) -> None:
        """Signals committed whose answer never came (the ledger logged them): their listeners still hear."""
        if not signal_ids:
            return
        self.report("warn", f"{sense}: {len(signal_ids)} committed signal(s) arrived without an answer; logged")
        self.scheduler.on_signal(sense, time.time())
        if self.fleet is not None:
            self.fleet.committed(SourceKind.SENSE, sense)
        self._settled(sense, [Committed(SourceKind.SENSE, sense)])

    # events ------------------------------------------------------------------------
    def events(self, stored: list[tuple[StoredEvent, Any]]) -> list[list[str]]:
        """Committed events (the emit desk): log each, wake its listeners; the senses each one woke."""
        woken = []
        now = time.time()
        items: dict[str, list[Committed]] = {}
        for event, payload in stored:
            if self.tracing is not None:  # before its listeners are woken: their computes are its children
                self.tracing.emitted(event.channel, event.id, event.origin, event.traceparent)
            if event.origin is None and self.fleet is not None:
                self.fleet.committed(SourceKind.CHANNEL, event.channel, event.id, event.ts, payload)
            if self.ledger.routing(event.id):  # once: a catch-up may have logged it since its commit
                self.log(logrows.emit(event.channel, payload, event.id, origin=event.origin, via=event.via,
                                      schema_version=event.schema_version, hash=event.hash),
                         event.ts, self.ledger.event_mark(event.id))
                self.ledger.event_logged(event.id)
            self.stats.event(event.channel)
            if self.report_signals:
                self.report("signal", f"emit {event.channel} #{event.id}: {short(payload)}")
            targets = self.scheduler.on_signal(event.channel, now)
            self.causes.woke(targets, self.causes.source(
                event.channel, event.cause if event.cause is not None else world(f"{event.channel} #{event.id}")),
                event.channel, event.id)
            self.stats.signalled(targets)
            woken.append(targets)
            items.setdefault(event.channel, []).append(
                Committed(SourceKind.CHANNEL, event.channel, event.id, event.ts, payload, event.origin))
        for channel, batch in items.items():
            self._settled(channel, batch)
        return woken

    def offline(self, channel: str | None) -> int:
        """Events stored without this engine (an offline `nerve emit` racing its start): log them, wake their
        listeners. Returns the rows logged."""
        logged = self.ledger.catch_up_events()
        if self.fleet is not None:
            self.fleet.committed_offline(channel)
        self.delivery.check([s for s, src in self.delivery.sources.items() if channel is None or hears(list(src), channel)],
                            BACKLOG)
        self._settled(channel, [Committed(SourceKind.CHANNEL, channel)])
        return logged

    def _settled(self, source: str | None, items: list[Committed]) -> None:
        """The batch of `source` is routed: threads waiting for one of its events read them, then the
        subscribers hear each."""
        if self.workflows is not None:
            self.workflows.events_committed(source)
        for subscriber in self.subscribers:
            for item in items:
                subscriber.committed(item)


def short(value: Any, limit: int = 120) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
