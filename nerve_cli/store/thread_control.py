"""Cancel or rerun a thread while no engine runs: the rows the engine would write, under the instance lock.

A cancelled thread is `cancelled` at once (a thread left `started` by a stopped
engine is not running anywhere); a rerun is `queued`, with the chain it starts
from, and starts at the next `nerve run`. Both record `by` and `via` as the
engine does; the running engine's own path is its control socket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.fork import fork
from nerve_cli.automaton.model import WorkflowMessage, is_round, rounds_used
from nerve_cli.clock import now_ms
from nerve_cli.config.launch import check_request
from nerve_cli.config.load import load_config
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore, workflow_runs
from nerve_cli.store.runs import ThreadRecord, persisted_chain, thread_record
from nerve_cli.vocab import logrows
from nerve_cli.vocab.states import ThreadStatus


def cancel_stopped(home: Path, run_id: str, reason: str | None, by: str, via: str) -> dict[str, Any]:
    """{"run_id", "status": "cancelled", "was"}; WorkflowError when there is no such thread or it ended."""
    layout = Layout(Path(home))
    with InstanceLock(layout.home, f"nerve thread cancel {run_id}"):
        rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == run_id]
        if not rows:
            raise WorkflowError(f"no thread {run_id} (see `nerve thread list`)")
        was = ThreadStatus(rows[0]["status"])
        if not was.live:
            raise WorkflowError(f"{run_id} is {was}: only a queued, running or waiting thread can be cancelled "
                                f"(start it again with `nerve thread rerun {run_id}`)")
        try:
            rounds = rounds_used(persisted_chain(layout.logs_db, run_id))
        except ValueError:
            rounds = 0  # its rounds are not counted; it is cancelled all the same
        with LogStore(layout.logs_db) as logs:
            logs.write(logrows.thread_status(run_id, rows[0]["workflow"], ThreadStatus.CANCELLED,
                                             reason=reason or f"cancelled by {by}", by=by, was=was.value,
                                             rounds=rounds, via=via))
    return {"run_id": run_id, "status": ThreadStatus.CANCELLED.value, "was": was.value}


def pause_stopped(home: Path, run_id: str, by: str, via: str, *, resume: bool) -> dict[str, Any]:
    """Pause a queued or waiting thread, or resume a paused one, with no engine running (the rows the engine
    would write); WorkflowError for any other. {"run_id", "status", "was" (pause)}."""
    from nerve_cli.automaton.waits import pending_wait  # orjson and the questions: only a pause pays

    layout = Layout(Path(home))
    with InstanceLock(layout.home, f"nerve thread {'resume' if resume else 'pause'} {run_id}"):
        rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == run_id]
        if not rows:
            raise WorkflowError(f"no thread {run_id} (see `nerve thread list`)")
        was, workflow = ThreadStatus(rows[0]["status"]), rows[0]["workflow"]
        try:
            chain = persisted_chain(layout.logs_db, run_id)
        except ValueError as exc:
            raise WorkflowError(f"{run_id} cannot be paused or resumed: {exc}") from None
        who = {"by": by, "via": via}
        with LogStore(layout.logs_db) as logs:
            if resume:
                if was is not ThreadStatus.PAUSED:
                    raise WorkflowError(f"{run_id} is {was}, not paused: only a paused thread can be resumed")
                wait = pending_wait(chain)
                if wait is not None:
                    logs.write(logrows.thread_status(run_id, workflow, ThreadStatus.WAITING, rounds=rounds_used(chain),
                                                     waiting_for={**wait.to_dict(), "description": wait.describe()},
                                                     resumed_from="paused", **who))
                    return {"run_id": run_id, "status": ThreadStatus.WAITING.value}
                record = thread_record(layout.home, run_id)
                request = {"prompt": record.prompt, "max_rounds": record.max_rounds} if record else {}
                logs.write(logrows.thread_status(run_id, workflow, ThreadStatus.QUEUED, **request,
                                                 resumed_from="paused", **who))
                return {"run_id": run_id, "status": ThreadStatus.QUEUED.value}
            if was is ThreadStatus.PAUSED:
                raise WorkflowError(f"{run_id} is already paused (`nerve thread resume {run_id}` goes on)")
            if was not in (ThreadStatus.QUEUED, ThreadStatus.WAITING):
                why = ("it was running when the engine stopped: start the engine (it resumes or crashes it) and "
                       "pause it then" if was is ThreadStatus.STARTED else "only a queued, running or waiting "
                       "thread can be paused")
                raise WorkflowError(f"{run_id} is {was}: {why}")
            logs.write(logrows.thread_status(run_id, workflow, ThreadStatus.PAUSED, was=was.value,
                                             rounds=rounds_used(chain), **who))
    return {"run_id": run_id, "status": ThreadStatus.PAUSED.value, "was": was.value}


def rerun_stopped(home: Path, run_id: str, from_round: int | None, message: str | None, by: str,
                  via: str) -> dict[str, Any]:
    """{"run_id" (the new thread), "status": "queued", "rerun_of"}: queued for the next engine, with the chain
    it starts from. WorkflowError for an unknown thread, a round out of range, an unknown or disabled workflow."""
    layout = Layout(Path(home))
    config = load_config(layout.home)
    with InstanceLock(layout.home, f"nerve thread rerun {run_id}"):
        record, chain, origin = rerun_of(layout.home, run_id, from_round, message, by, via)
        _, rounds = check_request(config, record.workflow, record.prompt, record.max_rounds)
        with LogStore(layout.logs_db) as logs:
            new = logs.allocate_run_id()
            payload: dict[str, Any] = {"prompt": record.prompt, "max_rounds": rounds, "origin": origin}
            if record.max_rounds > rounds:
                payload["requested_max_rounds"] = record.max_rounds
            logs.write(logrows.thread_status(new, record.workflow, ThreadStatus.QUEUED, **payload))
            counted = 0
            for seq, m in enumerate(chain):
                meta = {**m.meta, "maxRounds": rounds} if seq == 0 else dict(m.meta)
                counted += is_round(m.role)
                extra = {"round": counted} if is_round(m.role) else {}  # as the engine's journal numbers them
                logs.write(logrows.thread_message(new, record.workflow, {**m.to_dict(), "meta": meta}, seq, **extra))
    return {"run_id": new, "status": ThreadStatus.QUEUED.value, "rerun_of": run_id}



def rerun_of(home: Path, run_id: str, from_round: int | None, message: str | None, by: str,
             via: str | None) -> tuple[ThreadRecord, list[WorkflowMessage], dict[str, Any]]:
    """What a rerun of `run_id` starts from: the old thread's record, the chain (`fork`: [] for a fresh start, or
    the old one cut after `from_round`, its last message edited to `message`) and the new thread's origin.
    WorkflowError for an unknown thread or a round out of range."""
    try:
        record = thread_record(home, run_id)
    except ValueError as exc:
        raise WorkflowError(f"{run_id} cannot be run again: {exc}") from None
    if record is None:
        raise WorkflowError(f"no thread {run_id} (see `nerve thread list`)")
    try:
        chain = fork(record.chain, run_id, from_round, message, now_ms())
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None
    origin: dict[str, Any] = {"kind": "rerun", "of": run_id, "by": by}
    if via is not None:
        origin["via"] = via
    if from_round is not None:
        origin.update(from_round=from_round, edited=message is not None)
    return record, chain, origin
