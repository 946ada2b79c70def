"""What came of each compute: the supervisors' hooks answered, one record per compute closed, the loop kept going.

Calls run one way, outcomes → routing → pump: a worker's answer (or the
built-in senses', which answer like a group) is routed (`Router`), its
compute is finished (run_complete logged with its watermark, counters, the
scheduler and guards told, whoever waited for it answered from its record),
and the pump starts what is now due. `pump()` is the loop's one entry point:
the timer, a trigger, an emit and a request all come through it, and it ends
as errors the starts the pump could not hand over (`Miss`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from nerve_cli.clock import now_ms
from nerve_cli.config.model import BUILTIN_SENSES, THREADS_SENSE
from nerve_cli.home import Layout
from nerve_cli.kernel.control.snapshot import SenseErrors
from nerve_cli.kernel.core.delivery import Delivery
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.reads import Reads
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.core.stats import SIGNAL_MARK, SUCCESS_MARK, EngineStats
from nerve_cli.kernel.loop.builtins import Builtins, Signalled
from nerve_cli.kernel.loop.current import Current
from nerve_cli.kernel.loop.fanout import FanOut
from nerve_cli.kernel.loop.pump import KERNEL, Miss, Pump
from nerve_cli.kernel.loop.records import Computes
from nerve_cli.kernel.loop.router import Router
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.supervision.guards import Guards
from nerve_cli.kernel.supervision.penalty import Blame
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.kernel.supervision.supervisor import Inflight
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogKind, LogRow
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import BACKLOG, DEMAND, READ, Reason
from nerve_cli.vocab.sources import CursorJump
from nerve_cli.wire import protocol
from nerve_cli.wire.protocol import ErrorInfo

if TYPE_CHECKING:
    from nerve_cli.kernel.trace.spans import Tracing

# errors whose type the console line leaves out (the message says it)
_UNNAMED = ("TimeoutError", "WorkerDied")


class Errors:
    """Each sense's error count and last error, and the engine's most recent errors (for status and health)."""

    def __init__(self) -> None:
        self.by_sense: dict[str, dict[str, Any]] = {}  # sense → {"count", "last", "last_ts"}
        self.recent: list[dict[str, Any]] = []

    def counted(self, sense: str, message: str) -> None:
        stats = self.by_sense.setdefault(sense, {"count": 0, "last": None, "last_ts": None})
        stats["count"] += 1
        stats["last"], stats["last_ts"] = message, time.time()
        self.recent.append({"sense": sense, "message": message, "ts": now_ms()})
        del self.recent[:-20]

    def recovered(self, sense: str) -> None:
        if sense in self.by_sense:  # the log keeps the history
            self.by_sense[sense]["last"] = self.by_sense[sense]["last_ts"] = None

    def view(self, sense: str) -> SenseErrors:
        found = self.by_sense.get(sense)
        return SenseErrors(**found) if found else SenseErrors()

    def views(self) -> dict[str, SenseErrors]:
        return {sense: SenseErrors(**found) for sense, found in self.by_sense.items()}


class Outcomes:
    """The supervisors' hooks (`supervision.supervisor.GroupHooks`), and the end of every compute."""

    def __init__(self, current: Current, scheduler: Scheduler, router: Router, pump: Pump, groups: Groups,
                 builtins: Builtins, computes: Computes, reads: Reads, guards: Guards, delivery: Delivery,
                 ledger: Ledger, logs: LogStore, stats: EngineStats, log: Log, report: Report, layout: Layout,
                 peer_read: Callable[[str, protocol.ReadPeer], Awaitable[str | None]], *,
                 tracing: Tracing | None = None, report_computes: bool = False, report_signals: bool = False) -> None:
        self.current = current
        self.scheduler = scheduler
        self.router = router
        self._pump = pump
        self.groups = groups
        self.computes = computes
        self.reads = reads
        self.guards = guards
        self.delivery = delivery
        self.ledger = ledger
        self.logs = logs
        self.stats = stats
        self.log = log
        self.report = report
        self.layout = layout
        self._peer_read = peer_read  # (control.requests.read_peer)
        self.tracing = tracing
        self.report_computes = report_computes  # don't format lines nobody sees
        self.report_signals = report_signals
        self.errors = Errors()
        self.fanout: FanOut | None = None  # stores what computes emit (set by the engine once the emit desk is up)
        # the parts below answer here: the one place the loop's calls turn back up, as callbacks
        pump.on_wake = self.pump
        groups.hooks = self
        builtins.hooks = self

    # the loop's entry points -----------------------------------------------------
    def pump(self) -> None:
        """Start whatever is due; a start the pump could not hand over ends here, as an error."""
        misses = self._pump.run()
        while misses:
            for miss in misses:
                self._missed(miss)
            misses = self._pump.run()

    def trigger(self, sense: str, reason: Reason) -> None:
        if not self._pump.stopping and self.scheduler.trigger(sense, reason):
            self.pump()

    def demand(self, sense: str, bind: dict | None = None, reason: Reason = DEMAND) -> asyncio.Future:
        """Compute `sense` now (with `bind`'s parameter values); the future resolves when a compute started
        after this request (with the same values) ends."""
        future = asyncio.get_running_loop().create_future()
        self.reads.add(sense, self._pump.next_id, bind, future)
        self.scheduler.trigger(sense, reason)
        self._pump.promote(sense)  # a start of it waiting in its group's queue answers this: it goes first
        self.pump()
        return future

    def emitted(self, stored: list[tuple[Any, Any]]) -> list[list[str]]:
        """Committed events (the emit desk): routed, then their listeners start."""
        woken = self.router.events(stored)
        self.pump()
        return woken

    def refresh_runnable(self, senses: list[str]) -> None:
        """Tell the scheduler which of `senses` a ready worker can take now (the others keep their triggers)."""
        ready, held = self.groups.runnable(senses)
        self.scheduler.set_runnable(held, False)
        self.scheduler.set_runnable(ready, True)

    # errors ----------------------------------------------------------------------
    def record_error(self, sense: str, info: ErrorInfo, compute_id: int | None = None, *, located: bool = False,
                     **context: Any) -> None:
        """Log, count and say an error of `sense`; `located`: it carries its traceback, file and line (user
        code's); `context`: more for the log row (blamed...)."""
        if compute_id is not None and (record := self.computes.get(compute_id)) is not None:
            record.error = info
        detail: dict[str, Any] = {"error_type": info.type}
        if located:
            detail.update(traceback=info.traceback, file=info.file, line=info.line)
        if compute_id is not None:
            detail["compute_id"] = compute_id
        self.log(logrows.error(sense, info.message, sense=sense, **detail, **context))
        self.errors.counted(sense, info.message)
        where = f" at {info.file}:{info.line}" if info.file else ""
        named = f"{info.type}: " if info.type and info.type not in _UNNAMED else ""
        self.report("error", f"{sense}: {named}{info.message}{where}")

    # GroupHooks ------------------------------------------------------------------
    def compute_answered(self, group: str, inflight: Inflight, message: protocol.Message) -> None:
        sense, compute_id = inflight.sense, inflight.id
        duration = getattr(message, "duration_ms", 0.0)
        # the compute ended when its transaction did, in its worker: not when this loop got to the answer (a
        # busy loop's delay would be added to every next due time); never before it was sent, nor after now
        ended = getattr(message, "ended", 0.0)
        at = min(time.time(), max(ended, inflight.started)) if ended else None
        if inflight.cancelled:
            self._finish(sense, compute_id, inflight.reason, Outcome.TIMEOUT, duration, discarded=True, ended=at)
            self.delivery.failed(sense)
            return
        record = self.computes.get(compute_id)
        if (record is not None and self.reads.waiting(sense)
                and isinstance(message, (protocol.Signal, protocol.Silent))):
            record.launched["consumed"] = message.consumed  # for who asked for it
        for restart in getattr(message, "restarted", None) or ():  # committed with this compute's cursors
            try:
                why = CursorJump(restart.get("why") or CursorJump.REBUILT)
            except ValueError:
                why = CursorJump.REBUILT
            reads_from = int(restart.get("reads_from") or 0)
            self.log(logrows.cursor_restarted(sense, restart.get("source", "?"), int(restart.get("was_at") or 0),
                                              restart.get("identity_was"), restart.get("identity_now"), why,
                                              reads_from))
            if why is CursorJump.RESTORED:
                self.report("warn", f"{sense}: source {restart.get('source')} is behind its cursor (at "
                                    f"{restart.get('was_at')}): an earlier copy was put back; it reads the events "
                                    f"made since, after {reads_from}")
            else:
                self.report("warn", f"{sense}: source {restart.get('source')} was rebuilt since its cursor (at "
                                    f"{restart.get('was_at')}) was counted; it reads the new one from its start")
        if isinstance(message, (protocol.Signal, protocol.Silent)):  # as deep as what it consumed
            self.router.causes.answered(compute_id, sense, message.consumed)
            if message.emits and self.fanout is not None:  # committed with the compute: stored like any emit
                self.fanout.deliver(sense, compute_id, message.emits)
        if isinstance(message, protocol.Signal):
            self.router.skipped(sense, self.ledger.signal(sense, message.signal_id))
            # route first: the listeners become pending, and the pump after _finish starts them
            self._routed(sense, compute_id, [(message.signal_id, message.payload, message.ts)], message.workflow)
            self.delivery.answered(sense, message.more)
            self._listeners_first(lambda: self._finish(sense, compute_id, inflight.reason, Outcome.SIGNAL, duration,
                                                       signal_id=message.signal_id, events=message.events, ended=at,
                                                       pump=False))
        elif isinstance(message, Signalled):  # a built-in sense's
            self._routed(sense, compute_id, message.signals, None, message.causes)
            if message.more:
                self.trigger(THREADS_SENSE, BACKLOG)
            self._finish(sense, compute_id, inflight.reason, Outcome.SIGNAL, duration, signal_id=message.signal_id)
        elif isinstance(message, protocol.Silent):
            self.delivery.answered(sense, message.more)
            self._finish(sense, compute_id, inflight.reason, Outcome.SILENT, duration, kept=message.kept,
                         events=message.events, ended=at)
        elif isinstance(message, protocol.Error):
            self.record_error(sense, message.error, compute_id, located=group != KERNEL)
            self.delivery.failed(sense)
            self._finish(sense, compute_id, inflight.reason, Outcome.ERROR, duration, ended=at)

    def compute_output(self, group: str, message: protocol.Output) -> None:
        record = self.computes.get(message.id)
        if record is not None:
            record.output.append({"stream": message.stream, "text": message.text})
        if self.report_signals:
            where = "" if message.stream == "stdout" else " (stderr)"
            self.report("print", f"{message.sense} #{message.id}{where}: {message.text}")

    def compute_lost(self, group: str, inflight: Inflight, why: str, blame: Blame | None) -> None:
        sense = inflight.sense
        if not inflight.cancelled:
            if blame is None:
                cause = ""
            elif blame.sense == sense:
                cause = f"; this sense is the likely cause: {blame.because}"
            else:
                cause = f"; likely caused by {blame.sense} ({blame.because}), not by this sense"
            own = blame is not None and blame.sense == sense and blame.file is not None
            where: dict[str, Any] = {"file": blame.file, "line": blame.line} if own and blame else {}
            info = ErrorInfo("WorkerDied", f"compute lost: {why}{cause}", "", where.get("file"), where.get("line"))
            # (where its code crashed the worker, when it was this sense's)
            self.record_error(sense, info, inflight.id, blamed=None if blame is None else blame.sense, **where)
        # the worker may have died after its COMMIT, before answering: such a signal is real, log and route it
        self.router.skipped(sense, self.ledger.catch_up(sense))
        if self.fanout is not None:  # and so are the emits it committed
            self.fanout.replay(sense)
        self.delivery.failed(sense)
        self._finish(sense, inflight.id, inflight.reason, Outcome.LOST, (time.time() - inflight.started) * 1000,
                     group=group, blame=blame)

    def compute_timed_out(self, group: str, inflight: Inflight, timeout: float) -> None:
        grace = Policy.limits(self.current.config.senses.get(inflight.sense)).grace
        self.record_error(inflight.sense, ErrorInfo(
            "TimeoutError", f"compute exceeded its timeout of {timeout:g}s; result discarded "
                            f"(worker group={group} is killed if it still runs after {grace:g}s more)"), inflight.id)

    def worker_died(self, group: str, computing: frozenset[str], evidence: Blame | None, why: str,
                    counted: bool) -> Blame | None:
        supervisor = self.groups.get(group)
        senses = list(supervisor.senses) if supervisor is not None else sorted(computing)
        return self.guards.worker_died(group, computing, evidence, time.time(), senses=senses, why=why,
                                       counted=counted)

    def worker_stderr(self, group: str, pid: int | None, line: str) -> None:
        """A line written outside any compute (an import-time print, the worker's own log)."""
        self.report("print", f"group={group} pid={pid}: {line}")

    def sense_load_failed(self, group: str, sense: str, info: protocol.ErrorInfo) -> None:
        self.record_error(sense, ErrorInfo(info.type, f"could not load: {info.message}", info.traceback, info.file,
                                           info.line), located=True)

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

    def group_runnable(self, group: str, senses: set[str]) -> None:
        self.refresh_runnable(list(senses))

    def group_ready(self, group: str) -> None:
        supervisor = self.groups.get(group)
        if supervisor is not None:
            self.delivery.ready(supervisor.loaded, supervisor.takers)
        self.pump()

    def database_created(self, group: str, sense: str, why: str) -> None:
        """Said only of a sense that ran before: its rows and, as a listener, its cursors went with the old file."""
        state = self.scheduler.states.get(sense)
        if state is None or state.last_complete is None:
            return  # a new sense's first database
        path = self.layout.sense_db(sense)
        self.log(logrows.sense_db_created(sense, str(path), why, True))
        self.report("warn", f"{sense}: {why}; built again, empty, from its migrations ({path}); as a listener it "
                            "receives again every event its sources hold")

    def peer_read(self, group: str, message: protocol.ReadPeer) -> Awaitable[str | None]:
        return self._peer_read(group, message)

    def breach(self, group: str, pid: int, problem: str, blame: Blame | None) -> None:
        """The watchdog: a worker over its limits is stopped, for the sense whose code used what broke them; when
        no sense's code can be named, the group counts one unexplained breach (too many quarantine its senses)."""
        supervisor = self.groups.get(group)
        if supervisor is None:
            return
        computing = sorted(i.sense for i in supervisor.inflight.values())
        self.log(logrows.watchdog_kill(group, pid, problem, computing,
                                       None if blame is None else {"sense": blame.sense, "because": blame.because}))
        during = f" while computing {', '.join(computing)}" if computing else " (idle)"
        named = f"; {blame.sense}: {blame.because}" if blame is not None else "; no sense's code can be named"
        self.report("error", f"watchdog: worker group={group} pid={pid} {problem}{during}{named}; stopping it")
        if blame is None:
            self.guards.unexplained_breach(group, list(supervisor.senses), problem, time.time())
        supervisor.kill_for(blame)

    # the end of a compute --------------------------------------------------------
    def _routed(self, sense: str, compute_id: int, signals: list[tuple[int | None, Any, int | None]],
                directive: str | None, causes: list | None = None) -> None:
        thread = self.router.signals(sense, signals, directive, compute_id, causes)
        record = self.computes.get(compute_id)
        if directive and thread is not None and record is not None and self.reads.waiting(sense):
            record.launched.update({"workflow": directive, "thread": thread})  # someone waits for this compute

    def _listeners_first(self, finish: Callable[[], None]) -> None:
        """Hand the listeners a signal made pending their Compute lines, then `finish` the compute that signalled
        (its rows, counters, scheduler and guards), then pump as usual: the listener's worker starts while the
        kernel does the bookkeeping, one pass through the loop less on the hop. The rows the starts write are
        held and written after the finished compute's, so the log still reads run_complete, then run_start.
        Nothing the bookkeeping changes can start a listener sooner: it frees only the finished sense (and, in a
        group with a concurrency limit, its room, whose queue the pump after it drains in priority order)."""
        held = self.logs.hold()
        try:
            misses = self._pump.run()
        finally:
            self.logs.unhold(held)
        try:
            finish()
        finally:
            self.logs.replay(held)
        for miss in misses:
            self._missed(miss)
        self.pump()

    def _missed(self, miss: Miss) -> None:
        self.record_error(miss.sense, miss.error, miss.id)
        self._finish(miss.sense, miss.id, miss.reason, Outcome.ERROR, 0.0, pump=False)
        if miss.unavailable:
            self.delivery.failed(miss.sense)

    def _finish(self, sense: str, compute_id: int, reason: Reason, outcome: Outcome, duration_ms: float,
                discarded: bool = False, group: str | None = None, blame: Blame | None = None,
                signal_id: int | None = None, kept: bool = False, events: int = 0, pump: bool = True,
                ended: float | None = None) -> None:
        """`ended`: when the compute's transaction ended in its worker, if it said (else: now)."""
        now = time.time()
        record = self.computes.close(compute_id, sense)
        self.router.causes.ended(compute_id)
        row = logrows.run_complete(sense, compute_id, outcome, reason, duration_ms=duration_ms, signal_id=signal_id,
                                   discarded=discarded, kept=kept, events=events)
        if record.output:
            self.log(logrows.output(sense, compute_id, record.output))
        if self.tracing is not None:
            self.tracing.compute_finished(compute_id, outcome, record.error.to_dict() if record.error else None)
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
            self.errors.recovered(sense)
        if self.report_computes:
            self.report("debug", f"{sense} #{compute_id} {outcome} in {duration_ms:.1f}ms")
        self.scheduler.completed(sense, now if ended is None else ended)  # its interval counts from there
        if sense not in BUILTIN_SENSES:
            self.guards.after_compute(sense, outcome, now, group=group, blame=blame)
        if self.reads.ended(sense, compute_id, record.binding, record.answer(row.payload)):
            self.scheduler.trigger(sense, READ)  # someone waits for a compute of other parameter values
        if pump:
            self.pump()
