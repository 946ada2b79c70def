"""A person's questions: one round may ask several (a model's parallel tool calls), each with its own id.

A role's message that asks a person (meta `ask_person: true`) carries its
questions in meta `questions`: `[{"id", "question", "schema", "call"}]`, ids
`q1`, `q2`, … numbered over the whole thread, so `run-7 --question q2` names
one question for as long as the thread lives. A message from before ids were
stored asks one question, whose id is counted the same way.

Each answer is a message of role PERSON after the question, meta `{"decision",
"approved", "note", "by", "via", "question", "settles"[, "answer"]}`: a vote.
A question is settled by a rejection, or by the approvals its workflow asks
for (`approvers:` a count of distinct people, names, or both); the vote that
settles it says so (`settles: true`), so the chain alone says what is still
open and the policy is needed only when an answer is given. The thread waits
until every question of the round is settled, then resumes once.

`rule` is the one decision on an answer (pure): the votes to append, or a
ValueError naming what is wrong with nothing written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from nerve_cli.automaton.answers import answer_problems
from nerve_cli.automaton.model import (
    ANSWER_SCHEMA,
    APPROVE,
    NO_ANSWER,
    PERSON,
    REJECT,
    WorkflowMessage,
    asks_person,
    is_round,
    person_answer,
)

QUESTIONS = "questions"  # meta key of an asking message: its questions, each with its id
QUESTION = "question"  # meta key of a person's answer: the id of the question it answers
SETTLES = "settles"  # meta key of a person's answer: True when it settled its question
TOOL_APPROVAL = "tool_approval"  # meta key of a role's question(s) asking a person to allow tool calls


@dataclass(frozen=True)
class Question:
    """One question of a round: its id, its text, the JSON Schema of its answer, the tool call it is about."""

    id: str
    text: str
    schema: Mapping[str, Any] | None = None
    call: Mapping[str, Any] | None = None  # {"name", "arguments", "tool_call_id"} for a tool call's approval
    step: str | None = None  # a pipeline step's id, for its gate
    irreversible: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "question": self.text, "schema": self.schema}
        if self.call is not None:
            out["call"] = dict(self.call)
        if self.step is not None:
            out["step"] = self.step
        if self.irreversible:
            out["irreversible"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        schema, call = data.get("schema"), data.get("call")
        return cls(str(data.get("id")), str(data.get("question") or ""),
                   schema if isinstance(schema, Mapping) else None, call if isinstance(call, Mapping) else None,
                   data.get("step") if isinstance(data.get("step"), str) else None, data.get("irreversible") is True)


@dataclass(frozen=True)
class Standing:
    """A question and its votes so far."""

    question: Question
    approvals: tuple[str, ...] = ()  # who approved it, in order (distinct)
    settled: WorkflowMessage | None = None  # the vote that settled it

    @property
    def open(self) -> bool:
        return self.settled is None


@dataclass(frozen=True)
class Policy:
    """Who may answer, and how many approvals settle a question (nerve.yaml `workflows.W.approvers`,
    `self_approval`)."""

    count: int = 1  # distinct people whose approvals settle a question
    names: tuple[str, ...] = ()  # only they may answer (empty: anyone)
    self_approval: bool = True  # False: the person who started the thread may not approve it
    starter: str | None = None  # who started the thread (its origin's `by`, when a person did)


@dataclass
class Ruling:
    """What an answer does: the votes to append (in order), and whether the thread resumes now."""

    votes: list[WorkflowMessage] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)  # the question ids voted on
    settled: list[str] = field(default_factory=list)  # the ids this answer settled
    open: list[Question] = field(default_factory=list)  # still open after it
    resumes: bool = False


def stored_questions(meta: Mapping[str, Any], content: str, first: int) -> list[Question]:
    """The questions of an asking message's meta (ids stored), else the one it asks (id `q{first}`)."""
    stored = meta.get(QUESTIONS)
    if isinstance(stored, list) and stored and all(isinstance(q, Mapping) for q in stored):
        return [Question.from_dict(q) for q in stored]
    schema = meta.get(ANSWER_SCHEMA)
    approval = meta.get(TOOL_APPROVAL)
    call = approval.get("call") if isinstance(approval, Mapping) else None
    step = meta.get("step")
    return [Question(f"q{first}", content, schema if isinstance(schema, Mapping) else None,
                     call if isinstance(call, Mapping) else None, step if isinstance(step, str) else None,
                     meta.get("irreversible") is True)]


def build(meta: Mapping[str, Any], content: str, first: int) -> list[dict[str, Any]]:
    """The `questions` of a new asking message (ids from `q{first}` on): one per tool call it asks to allow
    (meta tool_approval.calls), else the one question it asks."""
    approval = meta.get(TOOL_APPROVAL)
    calls = approval.get("calls") if isinstance(approval, Mapping) else None
    if isinstance(approval, Mapping) and isinstance(calls, list) and calls:
        given = approval.get("questions")
        texts = given if isinstance(given, list) else []
        return [Question(f"q{first + i}", str(texts[i]) if i < len(texts) else call_question(call), None, call).to_dict()
                for i, call in enumerate(calls)]
    return [q.to_dict() for q in stored_questions(meta, content, first)]


def call_question(call: Mapping[str, Any]) -> str:
    """`Allow the tool call merge_pr({"number":7})?`."""
    arguments = orjson.dumps(call.get("arguments") or {}, option=orjson.OPT_NON_STR_KEYS).decode()
    return f"Allow the tool call {call.get('name')}({arguments})?"


def _fields(m: WorkflowMessage | Mapping[str, Any]) -> tuple[Any, str, Mapping[str, Any]]:
    if isinstance(m, WorkflowMessage):
        return m.role, m.content, m.meta
    meta = m.get("meta")
    return m.get("role"), str(m.get("content") or ""), meta if isinstance(meta, Mapping) else {}


def next_id(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> int:
    """The number the next question of the thread gets (questions asked so far + 1)."""
    count = 0
    for m in messages:
        if asks_person(m):
            role, content, meta = _fields(m)
            count += len(stored_questions(meta, content, count + 1))
    return count + 1


def standings(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> list[Standing] | None:
    """The questions of the round the chain waits on, each with its votes; None when it waits on none.

    The chain waits on a person when its last round asked one and only votes follow it. A vote naming no
    question (an answer given before ids) settles every open question.
    """
    index = _asking_index(messages)
    if index is None:
        return None
    _, content, meta = _fields(messages[index])
    questions = stored_questions(meta, content, next_id(messages[:index]))
    out = {q.id: Standing(q) for q in questions}
    for m in messages[index + 1:]:
        vote = m if isinstance(m, WorkflowMessage) else WorkflowMessage.from_dict(m)
        target = vote.meta.get(QUESTION)
        ids = [target] if isinstance(target, str) and target in out else [i for i, s in out.items() if s.open]
        for qid in ids:
            s = out[qid]
            if not s.open:
                continue
            by = str(vote.meta.get("by"))
            approvals = s.approvals + ((by,) if vote.meta.get("approved") and by not in s.approvals else ())
            settles = vote.meta.get(SETTLES, True) is not False  # a vote from before SETTLES settled its question
            out[qid] = Standing(s.question, approvals, vote if settles else None)
    return list(out.values())


def _asking_index(messages: Sequence[Any]) -> int | None:
    """The index of the asking message the chain's tail answers (only votes after it), else None."""
    for index in range(len(messages) - 1, -1, -1):
        role, _, _ = _fields(messages[index])
        if role == PERSON:
            continue
        return index if is_round(role) and asks_person(messages[index]) else None
    return None


def open_questions(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> list[Question] | None:
    """The questions still open (None: the chain waits on no person; []: all settled, it resumes)."""
    found = standings(messages)
    return None if found is None else [s.question for s in found if s.open]


def rule(messages: Sequence[WorkflowMessage], run_id: str, decision: str, by: str, via: str | None,
         note: str | None = None, data: Any = NO_ANSWER, question: str | None = None,
         policy: Policy = Policy(), now: int = 0) -> Ruling:
    """An answer to one question (`question` its id) or to every open one (None): the votes to append.

    ValueError, nothing to write, for: a decision that is neither approve nor reject, an unknown or
    settled question (the open ones named), a person the workflow's `approvers` do not name, the thread's
    starter approving under `self_approval: false`, a second approval by the same person, an answer its
    question's JSON Schema refuses (every problem listed), or an approval with no answer where the question
    asks for one.
    """
    if decision not in (APPROVE, REJECT):
        raise ValueError(f"decision must be {APPROVE!r} or {REJECT!r}, got {decision!r}")
    found = standings(messages)
    if found is None:
        raise ValueError(f"{run_id} is not waiting for a person")
    open_ = {s.question.id: s for s in found if s.open}
    if question is not None and question not in open_:
        known = {s.question.id for s in found}
        what = "was settled already" if question in known else "is not one of its questions"
        listed = ", ".join(open_) or "none"
        raise ValueError(f"{run_id}: question {question!r} {what} (open: {listed}; `nerve thread show {run_id}` "
                         "lists them)")
    if policy.names and by not in policy.names:
        raise ValueError(f"{by} may not answer {run_id}: its workflow's approvers are {', '.join(policy.names)} "
                         "(nerve.yaml workflows.W.approvers)")
    if decision == APPROVE and not policy.self_approval and policy.starter is not None and by == policy.starter:
        raise ValueError(f"{by} started {run_id} and may not approve it (nerve.yaml workflows.W.self_approval is "
                         "false): someone else must approve; a rejection is still yours to give")
    targets = [open_[question]] if question is not None else list(open_.values())
    ruling = Ruling()
    for s in targets:
        q = s.question
        if decision == APPROVE and by in s.approvals:
            raise ValueError(f"{by} has approved {run_id} {q.id} already: it needs "
                             f"{policy.count - len(s.approvals)} more approval(s) from someone else")
        if q.schema is not None and data is NO_ANSWER and decision == APPROVE:
            raise ValueError(f"{run_id} {q.id} asks for an answer matching its JSON Schema; give it with --answer "
                             f"JSON (schema: {orjson.dumps(q.schema).decode()[:300]})")
        if q.schema is not None and data is not NO_ANSWER:
            problems = answer_problems(q.schema, data)
            if problems:
                raise ValueError(f"the answer does not match {run_id} {q.id}'s JSON Schema: "
                                 + "; ".join(problems) + "; nothing was written")
        settles = decision == REJECT or len(s.approvals) + 1 >= policy.count
        vote = person_answer(decision, note, by, now, via, data)
        vote = WorkflowMessage(vote.role, vote.content, {**vote.meta, QUESTION: q.id, SETTLES: settles}, now)
        ruling.votes.append(vote)
        ruling.answered.append(q.id)
        if settles:
            ruling.settled.append(q.id)
    ruling.open = [s.question for s in open_.values() if s.question.id not in ruling.settled]
    ruling.resumes = not ruling.open
    return ruling


def settled(messages: Sequence[WorkflowMessage]) -> tuple[int, list[tuple[Question, WorkflowMessage]]] | None:
    """(the asking message's index, each question with the vote that settled it) when the chain's tail
    settles every question of its last round; None otherwise."""
    found = standings(messages)
    if not found or any(s.open for s in found):
        return None
    index = _asking_index(messages)
    assert index is not None
    return index, [(s.question, s.settled) for s in found if s.settled is not None]
