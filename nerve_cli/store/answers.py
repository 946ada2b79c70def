"""The one answer path: a person's answer to a waiting thread, however it came, recorded with `by` and `via`.

`nerve thread approve|reject`, `nerve top`, MCP, an answer link and the web
console all end here. `record` decides with `automaton.questions.rule` (which
question, whose vote counts, the answer's JSON Schema) and hands the rows to a
`ThreadRows`: the running engine's journal (its in-memory thread follows), or,
with no engine, `answer_stopped`'s rows written to logs.db under the instance
lock for the next `nerve run` — the same rows either way. Each vote is a
PERSON message (`by`, `via`, `question`, `settles`); when the answer settles
the last open question the thread is `queued` again (detail: `answer`, `by`,
`via`, `questions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nerve_cli.automaton.model import NO_ANSWER, WorkflowMessage
from nerve_cli.automaton.questions import Policy, Question, rule
from nerve_cli.automaton.waits import EventWait, pending_wait
from nerve_cli.clock import now_ms
from nerve_cli.config.load import load_config
from nerve_cli.config.model import WorkflowConfig
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore, query_logs, workflow_runs
from nerve_cli.store.runs import persisted_chain, queued_request
from nerve_cli.vocab import logrows
from nerve_cli.vocab.states import ThreadStatus


@dataclass(frozen=True)
class Answer:
    """A person's answer: to one question (`question`, its id) or to every open one (None)."""

    run_id: str
    decision: str  # approve | reject
    by: str  # who: git's user.name for the instance, else the login name; a link's or console's person
    via: str  # how: `nerve thread approve`, `nerve top`, `nerve mcp (client ...)`, `link`, `nerve ui`
    note: str | None = None
    data: Any = NO_ANSWER  # a structured answer (any JSON value)
    question: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What an answer did: the questions it voted on and settled, those still open, whether it resumes."""

    run_id: str
    decision: str
    answered: list[str]
    settled: list[str]
    open: list[Question]
    resumes: bool

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "decision": self.decision, "answered": self.answered,
                "settled": self.settled, "open": [q.id for q in self.open], "resumes": self.resumes}


class ThreadRows(Protocol):
    """Where a thread's rows go: the engine's journal, or logs.db directly when no engine runs."""

    def message(self, seq: int, message: dict[str, Any]) -> None: ...

    def queued(self, **detail: Any) -> None: ...


def policy_of(cfg: WorkflowConfig | None, origin: Mapping[str, Any] | None) -> Policy:
    """The workflow's approval rules (nerve.yaml `approvers`, `self_approval`) for a thread of this origin."""
    starter = (origin or {}).get("by")
    if cfg is None:
        return Policy(starter=starter if isinstance(starter, str) else None)
    return Policy(cfg.approval_count(), tuple(cfg.approver_names()), cfg.self_approval,
                  starter if isinstance(starter, str) else None)


def record(chain: Sequence[WorkflowMessage], answer: Answer, policy: Policy, rows: ThreadRows) -> Recorded:
    """Decide `answer` against the chain and write its votes (and the `queued` row when it settles the
    last open question) to `rows`. ValueError, nothing written, for an answer that cannot be taken."""
    wait = pending_wait(chain)
    if isinstance(wait, EventWait):
        raise ValueError(f"{answer.run_id} waits for an event ({wait.describe()}), not for a person; "
                         f"`nerve emit {wait.source} ...` resumes it")
    ruling = rule(chain, answer.run_id, answer.decision, answer.by, answer.via, answer.note, answer.data,
                  answer.question, policy, now_ms())
    for offset, vote in enumerate(ruling.votes):
        rows.message(len(chain) + offset, vote.to_dict())
    if ruling.resumes:
        rows.queued(answer=answer.decision, by=answer.by, via=answer.via, questions=ruling.answered)
    return Recorded(answer.run_id, answer.decision, ruling.answered, ruling.settled, ruling.open, ruling.resumes)


class _StoppedRows:
    """A stopped instance's rows: written to logs.db as the engine writes them."""

    def __init__(self, logs: LogStore, run_id: str, workflow: str, request: dict[str, Any]) -> None:
        self.logs, self.run_id, self.workflow, self.request = logs, run_id, workflow, request

    def message(self, seq: int, message: dict[str, Any]) -> None:
        self.logs.write(logrows.thread_message(self.run_id, self.workflow, message, seq))

    def queued(self, **detail: Any) -> None:
        self.logs.write(logrows.thread_status(self.run_id, self.workflow, ThreadStatus.QUEUED,
                                              prompt=self.request.get("prompt", ""),
                                              max_rounds=self.request.get("max_rounds"),
                                              origin=self.request.get("origin") or {}, **detail))


def answer_stopped(home: Path, answer: Answer) -> Recorded:
    """The answer written to logs.db under the instance lock (no engine runs): the thread resumes at the next
    `nerve run`. WorkflowError when it is not waiting for a person or the answer cannot be taken."""
    layout = Layout(Path(home))
    config = load_config(layout.home)
    with InstanceLock(layout.home, f"nerve thread {answer.decision} {answer.run_id}"):
        rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == answer.run_id]
        if not rows or rows[0]["status"] != ThreadStatus.WAITING:
            raise not_waiting(layout.logs_db, answer.run_id, rows[0]["status"] if rows else None)
        workflow = rows[0]["workflow"]
        cfg = config.workflows.get(workflow)
        if cfg is None:
            raise WorkflowError(f"{answer.run_id} cannot resume: workflow {workflow} is no longer in nerve.yaml")
        request = queued_request(layout.logs_db, answer.run_id)
        chain = waiting_chain(layout.logs_db, answer.run_id)
        with LogStore(layout.logs_db) as logs:
            try:
                return record(chain, answer, policy_of(cfg, request.get("origin")),
                              _StoppedRows(logs, answer.run_id, workflow, request))
            except ValueError as exc:
                raise WorkflowError(str(exc)) from None


def waiting_chain(logs_path: Path, run_id: str) -> list[WorkflowMessage]:
    """A waiting thread's chain; WorkflowError when it cannot be read or does not end with a wait."""
    try:
        chain = persisted_chain(logs_path, run_id)
    except ValueError as exc:
        raise WorkflowError(f"{run_id} cannot resume: {exc}") from None
    if pending_wait(chain) is None:
        raise WorkflowError(f"{run_id} is marked waiting but its last message asks nothing; "
                            "`nerve doctor` shows what its logs say")
    return chain


def not_waiting(logs_path: Path, run_id: str, status: str | None) -> WorkflowError:
    """Why a thread cannot be answered: it is not waiting (or does not exist)."""
    if status is None:
        known = [r["run_id"] for r in workflow_runs(logs_path, status=ThreadStatus.WAITING)]
        waiting = f"; waiting now: {', '.join(known)}" if known else "; no thread is waiting"
        return WorkflowError(f"no thread {run_id}{waiting} (see `nerve thread list --status waiting`)")
    return WorkflowError(f"{run_id} is {status}, not waiting for a person; only a waiting thread can be "
                         "approved or rejected (see `nerve thread list --status waiting`)")


def waiting_since(logs_path: Path, run_id: str, default: int) -> int:
    """When the thread began its current wait (its newest `waiting` row), else `default`."""
    rows = query_logs(logs_path, source="workflow", type=ThreadStatus.WAITING.value, ref=run_id, limit=1)
    return rows[0]["ts"] if rows else default
