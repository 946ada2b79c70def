"""The pump: the loop's one timer, and the hand-over of every start the scheduler says is due.

`run()` takes what is due now, hands each start to its group's worker (or to
the built-in senses, which compute in the kernel), opens its compute's record
and arms one timer for the next wake-up. A start it cannot hand over (no
worker can take it, or its parameter values do not fit) is returned to the
caller as a `Miss`, never finished here: the pump knows nothing of outcomes.
The timer calls `on_wake`, the loop's entry point that finishes the misses.

A group with a `concurrency` limit has a queue: a due start that finds the group full waits there,
ordered by priority with ageing (`core.priority`; a person's or an agent's compute is `urgent`, others
take their reflex's or sense's `priority`), and the next one is handed over when one of the group's
computes ends. A group without a limit has no queue and pays nothing for it.

Costs O(log N) per start whatever the number of senses N: the scheduler
answers from its heaps and knows which senses can run (the supervisors say
when that changes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nerve_cli.config.projection import BindError, Reading
from nerve_cli.kernel.core.causes import Causes
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.priority import NORMAL, RANK, URGENT, PriorityQueue
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler, Start
from nerve_cli.kernel.core.stats import EngineStats
from nerve_cli.kernel.loop.records import Computes
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.names import binding_key, hears
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import OVERDUE, Reason, TriggerKind
from nerve_cli.wire.protocol import ErrorInfo

if TYPE_CHECKING:
    from nerve_cli.config.model import SenseConfig
    from nerve_cli.kernel.loop.current import Current
    from nerve_cli.kernel.loop.records import Compute
    from nerve_cli.kernel.trace.spans import Tracing

KERNEL = "kernel"  # the group the built-in senses compute in
_ASKED = (TriggerKind.DEMAND, TriggerKind.READ)  # a person or an agent asked: urgent


class Builtin(Protocol):
    """What computes the kernel's own senses (nerve-health, nerve-threads)."""

    senses: frozenset[str]

    def compute(self, compute_id: int, sense: str, reason: Reason) -> None: ...


@dataclass(frozen=True)
class Miss:
    """A start the pump could not hand over: it ends as an error, by the caller."""

    sense: str
    id: int
    reason: Reason
    error: ErrorInfo
    unavailable: bool  # no worker could take it (the sense's events are checked again), else a BindError


@dataclass(frozen=True)
class Queued:
    """A start waiting for room in its group (`level`: its priority)."""

    start: Start
    level: str


class Pump:
    def __init__(self, scheduler: Scheduler, current: Current, groups: Groups, builtin: Builtin,
                 delivery: Delivery, reads: Reads, computes: Computes, stats: EngineStats, log: Log,
                 report: Report, on_wake: Callable[[], None], *, started_at: float,
                 tracing: Tracing | None = None, report_computes: bool = False, causes: Causes | None = None) -> None:
        self.scheduler = scheduler
        self.current = current
        self.groups = groups
        self.builtin = builtin
        self.delivery = delivery
        self.reads = reads
        self.computes = computes
        self.stats = stats
        self.log = log
        self.report = report
        self.on_wake = on_wake
        self.started_at = started_at
        self.tracing = tracing
        self.report_computes = report_computes  # don't format lines nobody sees
        self.causes = causes  # each compute takes the causal depth of what woke it
        self.next_id = 1
        self.stopping = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # epoch seconds the armed timer fires at
        self._running = False
        self.queues: dict[str, PriorityQueue[Queued]] = {}  # group → the starts waiting for room in it

    def run(self) -> list[Miss]:
        """Start whatever is due now and make sure a timer is armed for the next wake-up; the starts it
        could not hand over are returned."""
        if self.stopping or self._running:  # (a dispatch never calls back here; guarded all the same)
            return []
        self._running = True
        misses: list[Miss] = []
        try:
            now = time.time()
            for start in self.scheduler.take_due(now):
                if self._limit(start.sense) is not None:
                    self._queue(start, now)
                    continue
                miss = self._dispatch(start, now)
                if miss is not None:
                    misses.append(miss)
            if self.queues:
                misses.extend(self._drain(now))
        finally:
            self._running = False
            # whatever a dispatch did: a lost timer meant no interval sense ever ran again
            self._arm(self.scheduler.next_wakeup())
        return misses

    def _limit(self, sense: str) -> int | None:
        """The `concurrency` of the sense's group, None when it has none (or the sense is built in)."""
        settings = self.current.config.senses.get(sense)
        group = self.current.config.groups.get(settings.group) if settings is not None else None
        return group.concurrency if group is not None else None

    def level(self, start: Start) -> str:
        """A start's priority: urgent when asked for, else the highest of its sense's and of the reflexes that
        could have triggered it that name one."""
        if start.reason.kind in _ASKED:
            return URGENT
        config = self.current.config
        settings = config.senses.get(start.sense)
        levels = [settings.priority if settings is not None else NORMAL]
        kind, source = start.reason.kind, start.reason.source
        for reflex in config.active_reflexes():
            if reflex.sense != start.sense or reflex.priority is None:
                continue
            if ((kind in (TriggerKind.SIGNAL, TriggerKind.DEBOUNCED) and source is not None and hears(reflex.on, source))
                    or (kind in (TriggerKind.INTERVAL, TriggerKind.OVERDUE) and reflex.interval is not None)
                    or (kind is TriggerKind.CRON and reflex.cron is not None)
                    or (kind is TriggerKind.FILES and reflex.paths)):
                levels.append(reflex.priority)
        return max(levels, key=RANK.__getitem__)

    def _queue(self, start: Start, now: float) -> None:
        group = self.current.config.senses[start.sense].group
        queue = self.queues.get(group)
        if queue is None:
            queue = self.queues[group] = PriorityQueue(lambda q: q.level)
        queue.ageing = self.current.config.engine.priority_ageing
        queued = Queued(start, self.level(start))
        queue.append(queued, now)
        state = self.scheduler.states.get(start.sense)
        if state is not None:
            state.queued_since, state.queued_priority = now, queued.level

    def promote(self, sense: str) -> None:
        """A person asked for `sense` while its start waits in its group's queue: that start is theirs (it has no
        compute id yet, so it answers them), and goes as urgent."""
        state = self.scheduler.states.get(sense)
        settings = self.current.config.senses.get(sense)
        queue = self.queues.get(settings.group) if settings is not None else None
        if state is None or state.queued_since is None or queue is None or state.queued_priority == URGENT:
            return
        queued = next((q for q in queue if q.start.sense == sense), None)
        if queued is not None:
            queue.remove(queued)
            queue.append(Queued(queued.start, URGENT))
            state.queued_priority = URGENT

    def _drain(self, now: float) -> list[Miss]:
        """Hand over queued starts, first in each queue's order, while their group has room."""
        misses = []
        for group, queue in list(self.queues.items()):
            limit = self.current.config.groups.get(group)
            room = limit.concurrency if limit is not None else None
            while queue and (room is None or self.computes.in_group.get(group, 0) < room):
                waited = queue.waited(queue.peek(), now)
                queued = queue.popleft()
                state = self.scheduler.states.get(queued.start.sense)
                if state is not None:
                    state.queued_since = state.queued_priority = None
                self.stats.queue_waited(queued.level, waited)
                miss = self._dispatch(queued.start, now)
                if miss is not None:
                    misses.append(miss)
            if not queue:
                del self.queues[group]
        return misses

    def stop(self) -> None:
        self.stopping = True
        if self._timer is not None:
            self._timer.cancel()

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
        self.on_wake()

    def _dispatch(self, start: Start, now: float) -> Miss | None:
        compute_id, self.next_id = self.next_id, self.next_id + 1
        sense, reason = start.sense, start.reason
        if reason.kind in (TriggerKind.INTERVAL, TriggerKind.CRON) and start.due < self.started_at:
            reason = OVERDUE  # missed while no engine ran: once now, not a late tick, no back-fill
        settings = self.current.config.senses.get(sense)
        group = settings.group if settings is not None else "?"
        reading = self.current.readings.get(sense)
        if self.tracing is None and sense not in self.builtin.senses and (reading is None or not reading.bindings):
            # the common start (a worker's sense reading without bindings, no span to open first): its Compute
            # line goes before its bookkeeping, which the answer, read in a later pass of the loop, finds done
            supervisor = self.groups.get(group)
            sent = supervisor is not None and supervisor.compute(compute_id, sense, reason,
                                                                 self.delivery.sources_for(sense), None, None)
            self._started(compute_id, sense, reason, now, start, settings, group)
            return None if sent else _unavailable(sense, compute_id, reason, group)
        record = self._started(compute_id, sense, reason, now, start, settings, group)
        if sense in self.builtin.senses:
            self.builtin.compute(compute_id, sense, reason)
            return None
        try:
            filters, bind = self._reads_with(sense, reading)
        except BindError as exc:  # a sense with parameters, started without values (nobody read it with them)
            return Miss(sense, compute_id, reason, ErrorInfo("BindError", str(exc)), unavailable=False)
        if filters is not None:
            record.binding = binding_key(bind)
        supervisor = self.groups.get(group)
        if supervisor is None or not supervisor.compute(compute_id, sense, reason, self.delivery.sources_for(sense),
                                                        filters, bind):
            return _unavailable(sense, compute_id, reason, group)
        return None

    def _started(self, compute_id: int, sense: str, reason: Reason, now: float, start: Start,
                 settings: SenseConfig | None, group: str) -> Compute:
        """A start's bookkeeping: its counters, its `run_start` row, its span, its compute record and its causal
        depth; the record."""
        interval = reason.kind is TriggerKind.INTERVAL
        lateness = max(0.0, (now - start.due) * 1000) if interval else 0.0
        if interval:
            self.stats.late(lateness)
        else:
            self.stats.dispatched(sense)
        self.log(logrows.run_start(sense, compute_id, reason, lateness_ms=round(lateness, 3)))
        if self.tracing is not None:
            self.tracing.compute_started(sense, compute_id, reason, settings.group if settings else KERNEL)
        if self.report_computes:
            self.report("debug", f"compute {sense} #{compute_id} ({reason})")
        record = self.computes.start(compute_id, sense, None if sense in self.builtin.senses else group)
        if self.causes is not None:
            self.causes.started(compute_id, sense, reason.text)
        return record

    def _reads_with(self, sense: str, reading: Reading | None) -> tuple[dict | None, dict | None]:
        """The bindings (values in place) and parameter values a compute of `sense` (its `reading`) reads with."""
        if reading is None or not reading.bindings:
            return None, None
        bind = self.reads.next_bind(sense) if reading.params else None
        return reading.filters(bind), bind  # BindError when nobody gave the values


def _unavailable(sense: str, compute_id: int, reason: Reason, group: str) -> Miss:
    return Miss(sense, compute_id, reason,
                ErrorInfo("WorkerUnavailable", f"worker group={group} could not take the compute"), unavailable=True)
