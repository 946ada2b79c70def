"""Where the WorkflowManager and its parts write: workflow rows, system rows, console lines.

Every state change of a thread is a `workflow` row (logs.db writes the
workflow_runs upsert in the same flush) and is passed to the listeners; only a
valid message reaches the log. The parts (admission, spawn, recovery) are
handed the journal, so they write without calling back into the manager.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from nerve_cli.automaton.model import WorkflowMessage, is_round
from nerve_cli.config.model import THREADS_SENSE
from nerve_cli.kernel.core.causes import Cause, world
from nerve_cli.kernel.core.report import Report
from nerve_cli.kernel.workflows.kind import Thread
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.vocab.states import ThreadStatus

log = logging.getLogger(__name__)

Listener = Callable[[str, str, str, dict], None]  # (run_id, workflow, type, payload)


class Journal:
    def __init__(self, logs: LogStore, report: Report, on_statuses: Callable[[], None] | None = None) -> None:
        """`on_statuses`: called after a flush that wrote status rows (the engine's nerve-threads feed)."""
        self.logs = logs
        self.report = report
        self.listeners: list[Listener] = []
        self.on_statuses = on_statuses
        self._statuses = False  # status rows written since the last flush

    def status(self, thread: Thread, status: ThreadStatus, **detail: Any) -> None:
        """The thread takes `status` (its row, workflow_runs and the transition nerve-threads signals, one
        deeper than the thread, in one transaction)."""
        self._statuses = True
        self._write(thread, logrows.thread_status(thread.run_id, thread.workflow, status, **detail),
                    transition_cause(thread.run_id, thread.workflow, thread.origin).to_json())

    def _write(self, thread: Thread, row: LogRow, cause: dict[str, Any] | None = None) -> None:
        self.logs.write(row, cause=cause)
        for listener in list(self.listeners):
            try:
                listener(thread.run_id, thread.workflow, row.type, row.payload or {})
            except Exception:  # a listener must never break the kernel
                log.exception("workflow listener failed")

    def message(self, thread: Thread, seq: int, message: dict) -> None:
        WorkflowMessage.from_dict(message)  # only valid messages reach the log
        thread.messages.append(message)
        # the start message and a person's answer are not rounds
        extra = {"round": thread.rounds} if is_round(message["role"]) else {}
        self._write(thread, logrows.thread_message(thread.run_id, thread.workflow, message, seq, **extra))

    def role_failed(self, thread: Thread, role: str, attempt: int, attempts: int, reason: str, retry_in_s: float,
                    error: dict | None) -> None:
        """An attempt of a role failed and is retried: kept in the thread's story (not a status)."""
        self._write(thread, logrows.role_failed(thread.run_id, thread.workflow, role, attempt, attempts, reason,
                                                retry_in_s, error))

    def system(self, row: LogRow) -> None:
        """A row about a workflow's worker (started, exited, an error): not a thread's."""
        self.logs.write(row)

    def flush(self) -> bool:
        try:
            self.logs.flush()
        except sqlite3.Error as exc:
            self.report("error", f"logs.db: could not write workflow events ({exc}); will retry")
            return False
        if self._statuses and self.on_statuses is not None:
            self._statuses = False
            self.on_statuses()
        return True


def thread_cause(run_id: str, workflow: str, origin: dict[str, Any]) -> Cause:
    """A thread's causal depth and path: its origin's (a directive's), else a person's or a tool's (depth 0)."""
    return Cause.from_json(origin.get("cause")) or world(f"{run_id} ({workflow})")


def transition_cause(run_id: str, workflow: str, origin: dict[str, Any]) -> Cause:
    """What a thread's transitions are: one deeper than the thread."""
    return thread_cause(run_id, workflow, origin).hop(THREADS_SENSE)
