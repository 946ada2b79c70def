"""Guard rails around computes: failure back-off, quarantine that survives restarts, reset.

The bookkeeping is pure (`penalty.PenaltyBook`); this module applies its
verdicts to the scheduler, records them in logs.db (`store.quarantines`: they
outlive the engine) and lifts them. It is
handed the scheduler, the log store and the engine's `log`/`report` callbacks,
never the engine.
"""

from __future__ import annotations

import time

from nerve_cli.config.model import EngineConfig
from nerve_cli.kernel.core.pauses import SensePauses
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.scheduler import Scheduler
from nerve_cli.kernel.supervision.penalty import Blame, PenaltyBook, Verdict
from nerve_cli.store import quarantines
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.outcomes import Outcome


class Guards:
    """Back-off and quarantine for the senses of one scheduler, persisted in `logs`."""

    def __init__(self, settings: EngineConfig, scheduler: Scheduler, logs: LogStore, log: Log,
                 report: Report) -> None:
        self.book = PenaltyBook(settings)
        self.scheduler = scheduler
        self.logs = logs
        self.log = log
        self.report = report
        self.pauses = SensePauses(scheduler, logs, log, report)  # a person's hold, kept and restored alike

    def restore(self) -> None:
        self.pauses.restore()
        for sense, entry in quarantines.load_quarantines(self.logs.path).items():
            self.scheduler.block(sense, entry["until"], entry["why"], quarantine=True)
            self.report("warn", f"{sense} is quarantined until {_local(entry['until'])}: {entry['why']}")

    def update_config(self, settings: EngineConfig) -> None:
        self.book.settings = settings

    def worker_died(self, group: str, computing: frozenset[str], evidence: Blame | None, now: float, *,
                    senses: list[str], why: str = "", counted: bool = False) -> Blame | None:
        """The culprit of a worker's death (None when no evidence names one), quarantined if it did it too often;
        with no culprit, deaths nobody explains that keep coming quarantine every sense of the group (`senses`)."""
        blame, verdict = self.book.record_death(group, computing, evidence, now, why=why, counted=counted)
        if verdict is not None:
            for sense in [blame.sense] if blame is not None else senses:
                self._apply(sense, verdict)
        return blame

    def after_compute(self, sense: str, outcome: Outcome, now: float, *, group: str | None = None,
                      blame: Blame | None = None) -> None:
        state = self.scheduler.states.get(sense)
        if state is not None and state.quarantined:
            return  # quarantined by its worker's death just now: a back-off must not shorten that
        verdict = self.book.record(sense, outcome, now, group=group, blame=blame)
        if verdict is not None:
            self._apply(sense, verdict)

    def unexplained_breach(self, group: str, senses: list[str], problem: str, now: float) -> None:
        """A limit broken by the group with no sense's code to name: too often, and every sense of it waits."""
        verdict = self.book.record_breach(group, problem, now)
        if verdict is not None:
            for sense in senses:
                self._apply(sense, verdict)

    def _apply(self, sense: str, verdict: Verdict) -> None:
        self.scheduler.block(sense, verdict.until, verdict.why, quarantine=verdict.quarantine)
        if verdict.quarantine:
            quarantines.keep(self.logs, sense, verdict.until, verdict.why)
            self.log(logrows.quarantined(sense, verdict.until, verdict.why))
            self.report("error", f"{sense} quarantined until {_local(verdict.until)}: {verdict.why}")
        else:
            self.log(logrows.penalised(sense, verdict.until, verdict.why))
            self.report("warn", f"{sense} penalised: {verdict.why}")

    def reset(self, sense: str) -> bool:
        """Lift a penalty or quarantine; True if there was one."""
        state = self.scheduler.states.get(sense)
        had = bool(state and state.blocked_until)
        self.book.reset(sense)
        self.scheduler.unblock(sense)
        quarantines.lift(self.logs, sense)
        self.log(logrows.reset(sense, had))
        return had


def _local(epoch: float) -> str:
    """Local time with its zone shown (the CLI's display rule)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(epoch))
