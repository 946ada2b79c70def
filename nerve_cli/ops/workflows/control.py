"""`nerve thread cancel` and `nerve thread rerun`: through the running engine, or written for the next one.

With an engine running, its control socket does it (`cancel_thread`, `rerun_thread`): a running
thread's role is cancelled on its worker, a new thread starts at once. With none, the rows are
written to logs.db under the instance lock, as the engine writes them: a cancelled thread is
`cancelled` (a thread left `started` by a stopped engine is not running anywhere), a rerun is
`queued` and starts at the next `nerve run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.config.load import load_config
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.kernel.workflows import control
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.workflows.threads import normalise_run_id
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore, workflow_runs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.vocab.states import ThreadStatus


def cancel_thread(home: Path, run_id: str, reason: str | None, via: str) -> dict[str, Any]:
    """{"run_id", "status": cancelled|cancelling, "was", "via": engine|offline}; NerveError when it has ended.

    The cancelled row records who asked (`by`: git's user.name, else the login name) and `via`, the way."""
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        answer = request(home, "cancel_thread", run_id=run_id, reason=reason, by=by, via=via)
        return {"run_id": answer["run_id"], "status": answer["status"], "was": answer["was"], "via": "engine"}
    layout = Layout(Path(home))
    with InstanceLock(layout.home, f"nerve thread cancel {run_id}"):
        rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == run_id]
        if not rows or not ThreadStatus(rows[0]["status"]).live:
            raise control.not_cancellable(layout.logs_db, run_id)
        was = ThreadStatus(rows[0]["status"])
        request_ = queued_request(layout.logs_db, run_id)
        thread = Thread(run_id, rows[0]["workflow"], request_.get("prompt", ""), int(request_.get("max_rounds") or 1),
                        request_.get("origin") or {})
        try:
            thread.messages = [m.to_dict() for m in persisted_chain(layout.logs_db, run_id)]
        except ValueError:
            thread.messages = []  # its rounds are not counted; it is cancelled all the same
        with LogStore(layout.logs_db) as logs:
            control.cancelled(Journal(logs, _quiet), Kind(thread.workflow), thread, was,
                              reason or f"cancelled by {by}", by, via)
    return {"run_id": run_id, "status": ThreadStatus.CANCELLED.value, "was": was.value, "via": "offline"}


def rerun_thread(home: Path, run_id: str, from_round: int | None, message: str | None, via: str) -> dict[str, Any]:
    """{"run_id" (the new thread), "status", "rerun_of", "via"}: started now by the engine, or queued for its
    next start. NerveError for an unknown thread, a round out of range, an unknown or disabled workflow."""
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        answer = request(home, "rerun_thread", run_id=run_id, from_round=from_round, message=message, by=by, via=via)
        return {"run_id": answer["run_id"], "status": answer["status"], "rerun_of": run_id, "via": "engine"}
    layout = Layout(Path(home))
    config = load_config(layout.home)
    with InstanceLock(layout.home, f"nerve thread rerun {run_id}"), LogStore(layout.logs_db) as logs:
        manager = WorkflowManager(layout.home, config, logs, _quiet)
        manager.stopping = True  # nothing starts here: queued for the next engine
        try:
            answer = manager.rerun(run_id, from_round, message, by, via)
        finally:
            logs.flush()
    if answer["status"] == "dropped":
        raise WorkflowError(f"{run_id} could not be queued again: its workflow's queue refused it")
    return {"run_id": answer["run_id"], "status": answer["status"], "rerun_of": run_id, "via": "offline"}


def _quiet(level: str, line: str) -> None:
    """Console lines of the engine's parts, unwanted here: the command says what happened."""
