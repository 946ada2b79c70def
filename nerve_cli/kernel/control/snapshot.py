"""The running engine as its answers read it: typed, read-only views taken when asked.

The control requests, the metrics and the health sense read these, never the
parts' fields: the loop (`kernel.loop.desk`) takes a `Snapshot` (the whole
engine: status, a scrape, a health signal) or a `SenseView` (one sense, for a
request about it) from its parts, and they answer from that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nerve_cli.vocab.states import SenseStatus, WorkerState
from nerve_cli.wire.protocol import ErrorInfo

if TYPE_CHECKING:
    from nerve_cli.kernel.core.listeners import Snapshot as Backlogs
    from nerve_cli.kernel.core.scheduler import SenseState
    from nerve_cli.kernel.core.stats import EngineStats


@dataclass(frozen=True)
class SenseErrors:
    count: int = 0
    last: str | None = None  # the last error's message, None once a compute succeeded again
    last_ts: float | None = None


@dataclass(frozen=True)
class SenseView:
    """One sense the engine schedules, as now."""

    name: str
    group: str  # "kernel" for a built-in sense
    state: SenseState  # the scheduler's record (read, never changed, by whoever holds the view)
    next_due: float | None  # None: nothing is due (or it cannot run: its code did not load)
    errors: SenseErrors
    load_error: ErrorInfo | None = None  # its code did not load in its worker
    load_failed_since: float | None = None
    worker: WorkerView | None = None  # its group's worker (None: built in, or the group is not running)
    expect_signal_every: float | None = None
    stale_since: float | None = None

    @property
    def status(self) -> SenseStatus:
        state = self.state
        if self.load_error is not None:
            return SenseStatus.LOAD_FAILED
        if state.running:
            return SenseStatus.PENDING if state.queued_since is not None else SenseStatus.RUNNING
        if state.paused:
            return SenseStatus.PAUSED
        if state.quarantined:
            return SenseStatus.QUARANTINED
        if state.blocked_until:
            return SenseStatus.PENALISED
        return SenseStatus.PENDING if state.pending else SenseStatus.IDLE


@dataclass(frozen=True)
class WorkerView:
    """A sense group's worker, as now."""

    group: str
    state: WorkerState
    pid: int | None
    restarts: int
    inflight: int  # computes sent and not answered yet
    last_exit: str | None
    described: dict[str, Any]  # `nerve status`'s workers entry


@dataclass(frozen=True)
class Snapshot:
    """The whole engine, as now."""

    home: Path
    pid: int
    started_at: float
    senses: dict[str, SenseView]  # every sense the scheduler knows (built-ins included)
    workers: dict[str, WorkerView]
    pending: int  # senses with a compute waiting to start
    log_rows_buffered: int
    channels: list[str]
    warnings: list[str]  # nerve.yaml's current warnings: counted apart from errors
    enabled: frozenset[str]  # nerve.yaml's enabled senses
    errors: Mapping[str, SenseErrors]  # every sense an error was recorded for since the engine started
    recent_errors: list[dict[str, Any]]
    stats: EngineStats  # the counters the metrics read (kept by the loop; read here)
    workflows: dict[str, Any] = field(default_factory=dict)  # WorkflowManager.status()
    oldest_waiting: dict[str, int | None] = field(default_factory=dict)  # workflow → since when one waits (ms)
    fleet: dict[str, Any] | None = None  # this host in its fleet (Fleet.status()), when in one
    traces: dict[str, Any] | None = None  # the trace export (Tracing.status()), when traces are on
    webhooks_url: str | None = None
    notify: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # notify rule → its figures
    webhook_counts: Mapping[tuple[str, int], int] = field(default_factory=dict)
    backlogs: Backlogs = field(default_factory=dict)  # the last listener backlog count (at most a second old)
    agents: Mapping[str, Any] = field(default_factory=dict)  # agent → its store.inbox.AgentBacklog (as backlogs)
    freshness: Mapping[str, float] = field(default_factory=dict)  # sense → its expect_signal_every
    stale: Mapping[str, float] = field(default_factory=dict)  # sense → stale since
    causal: Mapping[str, Any] = field(default_factory=dict)  # causal depth refusals (kernel.core.causes.Causes.status)

    @property
    def errors_total(self) -> int:
        return sum(e.count for e in self.errors.values())
