"""Thread control: cancel a thread (a rerun's chain and origin are `store.thread_control.rerun_of`'s).

Cancel: a queued or waiting thread ends `cancelled` at once; a running one has
its role cancelled on its worker (the worker ends the thread, and the kernel
records it `cancelled`), and when it has not stopped within `cancel_grace` (a
role blocking its worker's loop cannot be interrupted) the kernel ends it
itself and stops the worker: the workflow's other running threads then follow
the crash rule. An ended thread cannot be cancelled: the error names its status.

Rerun: a new thread of the same workflow, prompt and limits, its origin naming
the old one; from round K it starts from the old chain cut after that round
(round 0: the prompt alone), optionally with the last message kept edited.

Each function decides and writes through the journal, then returns; the
manager starts what can start next and keeps the timers.
"""

from __future__ import annotations

from pathlib import Path

from nerve_cli.automaton.model import rounds_used
from nerve_cli.errors import WorkflowError
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.logs import workflow_runs
from nerve_cli.vocab.states import ThreadStatus


def cancelled(journal: Journal, kind: Kind, thread: Thread, was: ThreadStatus, reason: str, by: str,
              via: str | None = None) -> None:
    """Record the thread `cancelled` (the caller has taken it out of running, the queue or waiting)."""
    if thread.cancel_timer is not None:
        thread.cancel_timer.cancel()
        thread.cancel_timer = None
    for timer in (thread.timer, thread.run_timer):
        if timer is not None:
            timer.cancel()
    thread.timer = thread.run_timer = None
    thread.cancelling = None
    extra = {"via": via} if via is not None else {}
    journal.status(thread, ThreadStatus.CANCELLED, reason=reason, by=by, was=was.value,
                   rounds=rounds_used(thread.messages), **extra)
    journal.report("info", f"workflow {kind.name}: {thread.run_id} cancelled by {by} ({reason}; it was {was})")


def not_cancellable(logs_path: Path, run_id: str) -> WorkflowError:
    """Why a thread that is not live here cannot be cancelled: it ended (its status), or there is no such thread."""
    rows = [r for r in workflow_runs(logs_path) if r["run_id"] == run_id]
    if not rows:
        return WorkflowError(f"no thread {run_id} (see `nerve thread list`)")
    status = rows[0]["status"]
    return WorkflowError(f"{run_id} is {status}: only a queued, running or waiting thread can be cancelled "
                         f"(start it again with `nerve thread rerun {run_id}`)")

