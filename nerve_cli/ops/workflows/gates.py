"""`nerve thread approve|reject run-N [--note TEXT]`: a person answers a thread that waits for one.

Through the running engine (control socket `answer_thread`): the thread
resumes at once, or queues behind its workflow's running threads. With no
engine running the answer is written to logs.db under the instance lock and
the thread resumes at the next `nerve run` — the same rows the engine writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.config.load import load_config
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.kernel.workflows import gates
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.workflows.threads import normalise_run_id
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore, workflow_runs


def answer_thread(home: Path, run_id: str, decision: str, note: str | None, via: str,
                  data: Any = NO_ANSWER) -> dict[str, Any]:
    """{"run_id", "decision", "status": started|queued, "via": engine|offline}; NerveError when it is not waiting
    or the answer does not match the question's schema.

    The answer records who gave it (`person`: git's user.name, else the login name) and `via`, the way it
    came (`nerve thread approve`, `nerve top`, `nerve mcp`); `data` is a structured answer (any JSON value).
    """
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        extra = {} if data is NO_ANSWER else {"answer": data}
        answer = request(home, "answer_thread", run_id=run_id, decision=decision, note=note, by=by, via=via, **extra)
        return {"run_id": answer["run_id"], "decision": answer["decision"], "status": answer["status"],
                "via": "engine"}
    return {**_offline(home, run_id, decision, note, by, via, data), "via": "offline"}


def _offline(home: Path, run_id: str, decision: str, note: str | None, by: str, via: str,
             data: Any) -> dict[str, Any]:
    layout = Layout(Path(home))
    config = load_config(layout.home)
    with InstanceLock(layout.home, f"nerve thread {decision} {run_id}"):
        rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == run_id]
        if not rows or rows[0]["status"] != gates.WAITING:
            raise gates.not_waiting(layout.logs_db, run_id, rows[0]["status"] if rows else None)
        if rows[0]["workflow"] not in config.workflows:
            raise WorkflowError(f"{run_id} cannot resume: workflow {rows[0]['workflow']} is no longer in "
                                "nerve.yaml")
        thread = gates.waiting_thread(layout.logs_db, rows[0])
        kind = Kind(thread.workflow, waiting={run_id: thread})
        with LogStore(layout.logs_db) as logs:
            try:
                gates.answer(Journal(logs, lambda level, line: None), kind, thread, decision, note, by, via, data)
            except ValueError as exc:
                raise WorkflowError(str(exc)) from None
    return {"run_id": run_id, "decision": decision, "status": "queued"}
