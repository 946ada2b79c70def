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

from nerve_cli.kernel.core.report import Report
from nerve_cli.kernel.workflows.kind import Thread
from nerve_cli.store.logs import LogStore
from nerve_cli.automaton.model import WorkflowMessage, is_round, rounds_used

log = logging.getLogger(__name__)

Listener = Callable[[str, str, str, dict], None]  # (run_id, workflow, type, payload)


class Journal:
    def __init__(self, logs: LogStore, report: Report) -> None:
        self.logs = logs
        self.report = report
        self.listeners: list[Listener] = []

    def event(self, thread: Thread, type_: str, payload: dict) -> None:
        body = {"workflow": thread.workflow, **payload}
        self.logs.workflow_event(thread.run_id, thread.workflow, type_, body)
        for listener in list(self.listeners):
            try:
                listener(thread.run_id, thread.workflow, type_, body)
            except Exception:  # a listener must never break the kernel
                log.exception("workflow listener failed")

    def message(self, thread: Thread, seq: int, message: dict) -> None:
        WorkflowMessage.from_dict(message)  # only valid messages reach the log
        thread.messages.append(message)
        # the start message and a person's answer are not rounds
        extra = {"round": rounds_used(thread.messages)} if is_round(message["role"]) else {}
        self.event(thread, "message", {**message, "seq": seq, **extra})

    def system(self, type_: str, payload: dict) -> None:
        self.logs.append("system", type_, payload.get("workflow"), payload)

    def flush(self) -> bool:
        try:
            self.logs.flush()
            return True
        except sqlite3.Error as exc:
            self.report("error", f"logs.db: could not write workflow events ({exc}); will retry")
            return False
