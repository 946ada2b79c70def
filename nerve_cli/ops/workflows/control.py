"""`nerve thread cancel|rerun|pause|resume`: through the running engine, or written for the next one.

With an engine running, its control socket does it (`cancel_thread`, `rerun_thread`): a running
thread's role is cancelled on its worker, a new thread starts at once. With none, the store writes
the rows the engine would (`store.thread_control`) under the instance lock: a cancelled thread is
`cancelled`, a rerun is `queued` and starts at the next `nerve run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.instance.git import person
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.workflows.threads import normalise_run_id
from nerve_cli.store.thread_control import cancel_stopped, pause_stopped, rerun_stopped


def cancel_thread(home: Path, run_id: str, reason: str | None, via: str) -> dict[str, Any]:
    """{"run_id", "status": cancelled|cancelling, "was", "via": engine|offline}; NerveError when it has ended.

    The cancelled row records who asked (`by`: git's user.name, else the login name) and `via`, the way."""
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        answer = request(home, "cancel_thread", run_id=run_id, reason=reason, by=by, via=via)
        return {"run_id": answer["run_id"], "status": answer["status"], "was": answer["was"], "via": "engine"}
    return {**cancel_stopped(home, run_id, reason, by, via), "via": "offline"}


def rerun_thread(home: Path, run_id: str, from_round: int | None, message: str | None, via: str) -> dict[str, Any]:
    """{"run_id" (the new thread), "status", "rerun_of", "via"}: started now by the engine, or queued for its
    next start. NerveError for an unknown thread, a round out of range, an unknown or disabled workflow."""
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        answer = request(home, "rerun_thread", run_id=run_id, from_round=from_round, message=message, by=by, via=via)
        return {"run_id": answer["run_id"], "status": answer["status"], "rerun_of": run_id, "via": "engine"}
    return {**rerun_stopped(home, run_id, from_round, message, by, via), "via": "offline"}


def pause_thread(home: Path, run_id: str, via: str, *, resume: bool = False) -> dict[str, Any]:
    """`nerve thread pause|resume`: {"run_id", "status", "was" (pause), "via": engine|offline}; NerveError when it
    cannot be (it ended, is paused already, or is not paused). Records `by` and `via` as cancel does."""
    run_id = normalise_run_id(run_id)
    by = person(home)
    if engine_running(home):
        answer = request(home, "pause_thread", run_id=run_id, resume=resume, by=by, via=via)
        return {**{k: answer[k] for k in ("run_id", "status", "was") if k in answer}, "via": "engine"}
    return {**pause_stopped(home, run_id, by, via, resume=resume), "via": "offline"}
