"""Threads waiting for a person: the `waiting` status, the answer that resumes them, approval_timeout.

A role that returns `ask_person(question)` ends its worker call with
ThreadEnd(waiting) once the question is on disk: the thread leaves `running`
(its slot is free, its worker may even stop) and waits in `kind.waiting` —
on disk it is `waiting` in workflow_runs, so it survives restarts. A person's
answer (`nerve thread approve|reject`, the control socket's `answer_thread`)
is appended to the chain as a PERSON message and the thread is queued again;
the manager starts it like any other, and the moderator sees the answer as
the last message. `approval_timeout` ends a thread nobody answered as `failed`.

Each function decides and writes through the journal, then returns; the
manager starts what can start next and keeps the timers.
"""

from __future__ import annotations

from pathlib import Path

from nerve_cli.automaton.model import pending_question, person_answer
from nerve_cli.config.model import WorkflowConfig, format_duration
from nerve_cli.errors import WorkflowError
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store.logs import now_ms, query_logs, workflow_runs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.vocab.states import ThreadStatus

WAITING = ThreadStatus.WAITING


def wait(journal: Journal, kind: Kind, thread: Thread, question: str) -> None:
    """The thread's last message asked a person: park it (no slot) until an answer or approval_timeout."""
    thread.dispatched = False
    if thread.run_timer is not None:  # thread_timeout counts running time; it starts again on resume
        thread.run_timer.cancel()
        thread.run_timer = None
    thread.waiting_since = now_ms()
    kind.waiting[thread.run_id] = thread
    journal.status(thread, ThreadStatus.WAITING, question=question, rounds=thread.rounds)
    journal.report("info", f"workflow {kind.name}: {thread.run_id} waits for a person: {question[:200]} "
                           f"(answer with `nerve thread approve|reject {thread.run_id}`)")


def approval_deadline(cfg: WorkflowConfig | None, thread: Thread) -> tuple[float, str] | None:
    """(seconds left, reason) for the thread's approval_timeout, or None when it has none."""
    if cfg is None or cfg.approval_timeout is None or thread.waiting_since is None:
        return None
    remaining = cfg.approval_timeout - (now_ms() - thread.waiting_since) / 1000
    return max(0.0, remaining), (f"no answer from a person within approval_timeout "
                                 f"{format_duration(cfg.approval_timeout)}")


def expire(journal: Journal, kind: Kind, thread: Thread, reason: str) -> bool:
    """approval_timeout passed (or the thread was cancelled): it ends `failed` with the reason; False if it
    was answered meanwhile."""
    if kind.waiting.get(thread.run_id) is not thread:
        return False
    del kind.waiting[thread.run_id]
    if thread.timer is not None:
        thread.timer.cancel()
        thread.timer = None
    journal.status(thread, ThreadStatus.FAILED, reason=reason, rounds=thread.rounds)
    journal.report("error", f"workflow {kind.name}: {thread.run_id} failed: {reason}")
    return True


def answer(journal: Journal, kind: Kind, thread: Thread, decision: str, note: str | None, by: str,
           via: str | None = None) -> None:
    """Append the person's answer to the chain and queue the thread again (the caller starts it).

    thread_timeout counts running time: it starts again when the thread resumes.
    """
    message = person_answer(decision, note, by, now_ms(), via)  # ValueError for a decision that is neither
    kind.waiting.pop(thread.run_id, None)
    if thread.timer is not None:
        thread.timer.cancel()
        thread.timer = None
    journal.message(thread, len(thread.messages), message.to_dict())
    journal.status(thread, ThreadStatus.QUEUED, prompt=thread.prompt, max_rounds=thread.max_rounds,
                   origin=thread.origin, answer=decision, by=by, **({"via": via} if via is not None else {}))
    thread.waiting_since = None
    thread.started_ms = None
    thread.resumed = True


def waiting_thread(logs_path: Path, row: dict) -> Thread:
    """A `waiting` row of workflow_runs as the Thread it was (chain, request, since when it waits).

    WorkflowError when its chain does not end with a question (the logs were edited by hand).
    """
    run_id, name = row["run_id"], row["workflow"]
    request = queued_request(logs_path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    try:
        chain = persisted_chain(logs_path, run_id)
    except ValueError as exc:
        raise WorkflowError(f"{run_id} cannot resume: {exc}") from None
    if pending_question(chain) is None:
        raise WorkflowError(f"{run_id} is marked waiting but its last message asks nothing; "
                            "`nerve doctor` shows what its logs say")
    thread.messages = [m.to_dict() for m in chain]
    if chain:
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
    rows = query_logs(logs_path, source="workflow", type=WAITING, ref=run_id, limit=1)
    thread.waiting_since = rows[0]["ts"] if rows else row["ts"]
    return thread


def not_waiting(logs_path: Path, run_id: str, status: str | None) -> WorkflowError:
    """Why a thread cannot be answered: it is not waiting (or does not exist)."""
    if status is None:
        known = [r["run_id"] for r in workflow_runs(logs_path, status=WAITING)]
        waiting = f"; waiting now: {', '.join(known)}" if known else "; no thread is waiting"
        return WorkflowError(f"no thread {run_id}{waiting} (see `nerve thread list --status waiting`)")
    return WorkflowError(f"{run_id} is {status}, not waiting for a person; only a waiting thread can be "
                         "approved or rejected (see `nerve thread list --status waiting`)")
