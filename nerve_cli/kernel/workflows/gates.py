"""Waiting threads: the `waiting` status, what resumes them (a person's answer, an event), their timeouts.

A role that returns `ask_person(question)` or `wait_for_event(...)` ends its
worker call with ThreadEnd(waiting) once its message is on disk: the thread
leaves `running` (its slot is free, its worker may even stop) and waits in
`kind.waiting` — on disk it is `waiting` in workflow_runs, so it survives
restarts. What it waits for is in its last message (`automaton.waits`).

A person's answer (`nerve thread approve|reject`, the control socket's
`answer_thread`) or the event that matched (`waits`) is appended to
the chain and the thread is queued again; the manager starts it like any
other, and the moderator sees the answer as the last message.
`approval_timeout` ends a thread nobody answered as `failed`; an event wait's
own timeout resumes it with a message saying so.

Each function decides and writes through the journal, then returns; the
manager starts what can start next and keeps the timers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import WorkflowMessage
from nerve_cli.automaton.waits import EventWait, PersonWait, TimeWait, pending_wait
from nerve_cli.config.model import WorkflowConfig, format_duration
from nerve_cli.kernel.workflows.journal import Journal
from nerve_cli.kernel.workflows.kind import Kind, Thread
from nerve_cli.store import answers
from nerve_cli.store.logs import now_ms
from nerve_cli.store.runs import queued_request
from nerve_cli.vocab.states import ThreadStatus

WAITING = ThreadStatus.WAITING


def wait(journal: Journal, kind: Kind, thread: Thread) -> None:
    """The thread's last message waits (a person, an event): park it (no slot) until it is answered."""
    thread.dispatched = False
    if thread.run_timer is not None:  # thread_timeout counts running time; it starts again on resume
        thread.run_timer.cancel()
        thread.run_timer = None
    thread.wait = pending_wait(thread.messages)
    thread.waiting_since = now_ms()
    kind.waiting[thread.run_id] = thread
    journal.status(thread, ThreadStatus.WAITING, **waiting_payload(thread))
    if isinstance(thread.wait, (EventWait, TimeWait)):
        journal.report("info", f"workflow {kind.name}: {thread.run_id} waits for {thread.wait.describe()}")
    else:
        question = (thread.wait.question if thread.wait is not None else "").strip().splitlines() or [""]
        journal.report("info", f"workflow {kind.name}: {thread.run_id} waits for a person: {question[0][:200]} "
                               f"(answer with `nerve thread approve|reject {thread.run_id}`)")


def waiting_payload(thread: Thread) -> dict[str, Any]:
    """The `waiting` row: what it waits for (`waiting_for`), a person's question, the rounds so far."""
    payload: dict[str, Any] = {"rounds": thread.rounds}
    if isinstance(thread.wait, (EventWait, TimeWait)):
        payload["reason"] = f"waits for {thread.wait.describe()}"
    elif thread.wait is not None:
        payload["question"] = thread.wait.question
    if thread.wait is not None:
        payload["waiting_for"] = {**thread.wait.to_dict(), "description": thread.wait.describe()}
    return payload


def deadline(cfg: WorkflowConfig | None, thread: Thread) -> tuple[float, str] | None:
    """(seconds left, reason) before the thread's wait times out, or None when it never does.

    A person's: `approval_timeout` (the thread then fails); an event's: its own timeout (it then resumes).
    """
    if thread.waiting_since is None:
        return None
    waited = (now_ms() - thread.waiting_since) / 1000
    if isinstance(thread.wait, TimeWait):  # it wakes then, like an event wait's timeout
        return max(0.0, thread.wait.seconds - waited), f"slept {format_duration(thread.wait.seconds)}"
    if isinstance(thread.wait, EventWait):
        if thread.wait.timeout_s is None:
            return None
        return max(0.0, thread.wait.timeout_s - waited), f"timeout {format_duration(thread.wait.timeout_s)}"
    if cfg is None or cfg.approval_timeout is None:
        return None
    return max(0.0, cfg.approval_timeout - waited), (f"no answer from a person within approval_timeout "
                                                     f"{format_duration(cfg.approval_timeout)}")


def expire(journal: Journal, kind: Kind, thread: Thread, reason: str) -> bool:
    """approval_timeout passed (or the thread was cancelled): it ends `failed` with the reason; False if it
    was answered meanwhile."""
    if kind.waiting.get(thread.run_id) is not thread:
        return False
    _unpark(kind, thread)
    journal.status(thread, ThreadStatus.FAILED, reason=reason, rounds=thread.rounds)
    journal.report("error", f"workflow {kind.name}: {thread.run_id} failed: {reason}")
    return True


def resume(journal: Journal, kind: Kind, thread: Thread, message: WorkflowMessage, detail: dict[str, Any]) -> bool:
    """Append what answered the wait to the chain and queue the thread again (the caller starts it);
    False when it no longer waits (answered, cancelled or timed out meanwhile).

    thread_timeout counts running time: it starts again when the thread resumes.
    """
    if kind.waiting.get(thread.run_id) is not thread:
        return False
    _unpark(kind, thread)
    journal.message(thread, len(thread.messages), message.to_dict())
    journal.status(thread, ThreadStatus.QUEUED, prompt=thread.prompt, max_rounds=thread.max_rounds,
                   origin=thread.origin, **detail)
    thread.waiting_since = None
    thread.started_ms = None
    thread.resumed = True
    return True


class _JournalRows:
    """The store-level answer path's rows, through the engine's journal (its thread follows in memory)."""

    def __init__(self, journal: Journal, kind: Kind, thread: Thread) -> None:
        self.journal, self.kind, self.thread = journal, kind, thread

    def message(self, seq: int, message: dict[str, Any]) -> None:
        self.journal.message(self.thread, seq, message)

    def queued(self, **detail: Any) -> None:
        thread = self.thread
        _unpark(self.kind, thread)
        self.journal.status(thread, ThreadStatus.QUEUED, prompt=thread.prompt, max_rounds=thread.max_rounds,
                            origin=thread.origin, **detail)
        thread.waiting_since = None
        thread.started_ms = None
        thread.resumed = True


def answer(journal: Journal, kind: Kind, thread: Thread, given: answers.Answer,
           cfg: WorkflowConfig | None) -> answers.Recorded:
    """A person's answer through the one answer path (`store.answers`): its votes appended to the chain;
    once every question of the round is settled the thread is queued again (`resumes`), else it waits on
    for the open ones. ValueError, nothing written, for an answer that cannot be taken."""
    if kind.waiting.get(thread.run_id) is not thread:
        raise ValueError(f"{thread.run_id} is not waiting")
    chain = [WorkflowMessage.from_dict(m) for m in thread.messages]
    done = answers.record(chain, given, answers.policy_of(cfg, thread.origin), _JournalRows(journal, kind, thread))
    if not done.resumes:
        thread.wait = pending_wait(thread.messages)
    return done


def _unpark(kind: Kind, thread: Thread) -> None:
    del kind.waiting[thread.run_id]
    if thread.timer is not None:
        thread.timer.cancel()
        thread.timer = None
    thread.wait = None


def waiting_thread(logs_path: Path, row: dict) -> Thread:
    """A `waiting` row of workflow_runs as the Thread it was (chain, request, what and since when it waits).

    WorkflowError when its chain does not end with a wait (the logs were edited by hand).
    """
    run_id, name = row["run_id"], row["workflow"]
    request = queued_request(logs_path, run_id)
    thread = Thread(run_id, name, request.get("prompt", ""), int(request.get("max_rounds") or 1),
                    request.get("origin") or {})
    thread.restore(request)
    chain = answers.waiting_chain(logs_path, run_id)
    thread.wait = pending_wait(chain)
    thread.messages = [m.to_dict() for m in chain]
    if chain:
        thread.max_rounds = int(chain[0].meta.get("maxRounds", thread.max_rounds))
    thread.waiting_since = answers.waiting_since(logs_path, run_id, row["ts"])
    return thread


not_waiting = answers.not_waiting


def is_person(thread: Thread) -> bool:
    return isinstance(thread.wait, PersonWait)
