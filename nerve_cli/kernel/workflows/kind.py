"""The WorkflowManager's bookkeeping: one `Kind` per workflow, one `Thread` per run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import is_round
from nerve_cli.automaton.waits import Wait
from nerve_cli.home import Layout
from nerve_cli.kernel.core.priority import NORMAL, PriorityQueue
from nerve_cli.kernel.supervision.process import WorkerProcess
from nerve_cli.vocab.states import WorkerState
from nerve_cli.wire import protocol


@dataclass
class Thread:
    run_id: str
    workflow: str
    prompt: str
    max_rounds: int
    origin: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)  # the persisted chain, seq order
    dispatched: bool = False  # ThreadStart sent to the current worker
    resumed: bool = False
    started_ms: int | None = None  # first start; thread_timeout counts from here, across resumes
    waiting_since: int | None = None  # it began to wait at this time (unix ms); its wait's timeout counts from it
    wait: Wait | None = None  # what it waits for (a person, an event), while it waits
    timer: asyncio.TimerHandle | None = None  # its approval_timeout, or its event wait's timeout
    run_timer: asyncio.TimerHandle | None = None  # its thread_timeout, while it runs
    cancelling: tuple[str, str, str | None] | None = None  # (reason, by, via): its role was told to stop;
    # it ends `cancelled`
    cancel_timer: asyncio.TimerHandle | None = None  # its cancel_grace: then the kernel ends it and stops the worker
    priority: str = NORMAL  # its place in its workflow's queue (`workflows.W.priority`; urgent: a person's)
    key: str | None = None  # its `concurrency_key` value (JSON text): one live thread per key
    pausing: tuple[str, str | None] | None = None  # (by, via): paused once its running round's message is on disk
    _counted: tuple[list[dict[str, Any]] | None, int, int] = (None, 0, 0)  # (that list, messages seen, rounds)

    def restore(self, request: dict[str, Any]) -> None:
        """Its priority and key as its `queued` row recorded them (a thread read back at a restart)."""
        if isinstance(request.get("priority"), str):
            self.priority = request["priority"]
        if isinstance(request.get("key"), str):
            self.key = request["key"]

    @property
    def rounds(self) -> int:
        """Rounds in the chain (the roles' messages): each message is counted once, not once per round,
        so a round costs the same at round 2,000 as at round 2. A chain replaced whole is counted again."""
        chain, seen, rounds = self._counted
        if chain is not self.messages:
            chain, seen, rounds = self.messages, 0, 0
        for message in chain[seen:] if seen < len(chain) else ():
            rounds += is_round(message.get("role"))
        self._counted = (chain, len(chain), rounds)
        return rounds


@dataclass
class Kind:
    """One workflow: its worker, its running threads (≤ concurrency), its queue (higher priority first, FIFO
    within a level, with ageing: `core.priority`),
    the threads waiting for a person or an event (no slot) and the paused ones (no slot, nothing resumes them
    but `nerve thread resume`)."""

    name: str
    worker: WorkerProcess | None = None
    state: WorkerState = WorkerState.STOPPED  # stopped | starting | ready | stopping
    running: dict[str, Thread] = field(default_factory=dict)
    queue: PriorityQueue[Thread] = field(default_factory=lambda: PriorityQueue(lambda t: t.priority))
    waiting: dict[str, Thread] = field(default_factory=dict)
    paused: dict[str, Thread] = field(default_factory=dict)
    crashes: int = 0  # worker deaths since the last acknowledged message
    draining: bool = False
    idle: asyncio.TimerHandle | None = None
    spawn_task: asyncio.Task[None] | None = None
    # (file stat, failure): a worker reported the file does not load; reused until the file changes
    load_error: tuple[tuple[int, int] | None, protocol.ErrorInfo] | None = None

    def held_keys(self) -> dict[str, str]:
        """key → the live thread (running, waiting or paused) that holds it."""
        return {t.key: t.run_id for group in (self.running, self.waiting, self.paused) for t in group.values()
                if t.key is not None}

    def cancel_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None

    def file_stat(self, home: Path) -> tuple[int, int] | None:
        try:
            st = Layout(home).workflow_file(self.name).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def current_load_error(self, home: Path) -> protocol.ErrorInfo | None:
        if self.load_error is None:
            return None
        stat, failure = self.load_error
        if stat != self.file_stat(home):
            self.load_error = None  # edited since: worth another try
            return None
        return failure
