"""Workflow types: a chain of messages, roles that extend it, a moderator that routes.

A workflow file defines `workflow = WorkflowDefinition(roles={...}, moderator=...)`.
`WorkflowDefinition` is generic over the roles' meta type, so a type checker
rejects a role whose `RoleResult` carries the wrong meta:

    class ReviewMeta(TypedDict):
        approved: bool

    async def reviewer(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]: ...

    workflow = WorkflowDefinition[ReviewMeta](roles={"reviewer": reviewer}, moderator=route)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from nerve_cli.automaton.answers import check_schema

START = "__start__"
END = "__end__"
# The role of a person's answer to a waiting thread (`nerve thread approve|reject`).
PERSON = "__person__"
# The role of the event (or the timeout) that resumed a thread waiting for one (`wait_for_event`).
EVENT = "__event__"
# The role of the runtime's note that a tool call a person answered is about to run (see roles.tools).
TOOL = "__tool__"
RESERVED_ROLES = frozenset({START, END, PERSON, EVENT, TOOL})
# Messages that are not rounds: only a role's own message is a round.
NOT_ROUNDS = (START, PERSON, EVENT, TOOL)
# meta key marking a message that asks a person and stops the thread until answered
ASKS_PERSON = "ask_person"
ANSWER_SCHEMA = "answer_schema"  # meta key: the JSON Schema a question's structured answer must match

M = TypeVar("M", bound=Mapping[str, Any])


@dataclass(frozen=True)
class WorkflowMessage:
    """One link of a thread's chain. `messages[0]` is the start message (role START)."""

    role: str
    content: str
    meta: Mapping[str, Any]
    timestamp: int  # unix ms

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "meta": dict(self.meta), "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, data: Any) -> WorkflowMessage:
        """Rebuild a message from its persisted form; ValueError says which field is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a workflow message must be an object, got {type(data).__name__}")
        role, content, meta, ts = (data.get(k) for k in ("role", "content", "meta", "timestamp"))
        if not isinstance(role, str) or not role:
            raise ValueError(f"workflow message role must be a non-empty string, got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"workflow message content must be a string, got {type(content).__name__}")
        # meta is checked when a chain is rebuilt from the log, not only when a role returns it
        if not isinstance(meta, Mapping):
            raise ValueError(f"workflow message meta must be an object, got {type(meta).__name__}")
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise ValueError(f"workflow message timestamp must be an integer (unix ms), got {ts!r}")
        return cls(role, content, dict(meta), ts)


@dataclass(frozen=True)
class RoleResult(Generic[M]):
    """What a role returns: the content of its message and its typed meta."""

    content: str
    meta: M


@dataclass(frozen=True)
class AskPerson(RoleResult[M]):
    """What a role returns to stop the thread and wait for a person: `content` is the question.

    The question is persisted as the role's message (meta gets `ask_person: true`,
    and `answer_schema` when it declares one), the thread becomes `waiting` and holds
    no worker slot; `nerve thread approve|reject run-N [--note TEXT] [--answer JSON]`
    appends the person's answer (role PERSON, meta `{"decision", "approved", "note",
    "by"[, "answer"]}`) and the thread resumes: the moderator sees the answer as the
    last message.
    """

    schema: Mapping[str, Any] | None = None  # the JSON Schema a structured answer must match


def ask_person(question: str, meta: Mapping[str, Any] | None = None, *,
               schema: Mapping[str, Any] | None = None) -> AskPerson[Any]:
    """Stop the thread until a person answers `question` (see AskPerson).

    With `schema` (a JSON Schema), approving takes an answer matching it (`--answer JSON`), handed to
    the moderator as data in the answer's `meta["answer"]`.
    """
    return AskPerson(question, dict(meta or {}), check_schema(schema) if schema is not None else None)


class RoleSetupError(Exception):
    """A role cannot work as set up (unknown model, missing API key): the thread fails at once, no retries."""

    lead = "cannot run"  # how the thread's reason introduces it: "role 'x' cannot run: ..."


# A role is an async function of the chain so far; it may have side effects.
Role = Callable[[Sequence[WorkflowMessage]], Awaitable[RoleResult[M]]]
# The moderator is a pure function of the chain: the next role's name, or END.
Moderator = Callable[[Sequence[WorkflowMessage]], str]


@dataclass(frozen=True)
class WorkflowDefinition(Generic[M]):
    """Roles by name plus the moderator that passes the microphone between them."""

    roles: Mapping[str, Role[M]]
    moderator: Moderator


def start_message(prompt: str, max_rounds: int, timestamp: int) -> WorkflowMessage:
    """messages[0] of every thread: the prompt, as the start message (role START)."""
    return WorkflowMessage(START, prompt, {"maxRounds": max_rounds}, timestamp)


def is_round(role: Any) -> bool:
    """A round is a role's message: not the start message, not a person's answer, not the event that resumed
    a wait, not the runtime's note about a tool call."""
    return role not in NOT_ROUNDS


def _role(m: WorkflowMessage | Mapping[str, Any]) -> Any:
    return m.role if isinstance(m, WorkflowMessage) else m.get("role")


def rounds_used(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> int:
    """Rounds in a chain: the roles' messages (the start message, a person's answers, events are not rounds)."""
    return sum(1 for m in messages if is_round(_role(m)))


def asks_person(message: WorkflowMessage | Mapping[str, Any]) -> bool:
    """True for a role's message that asked a person (the thread waits until the answer follows it)."""
    meta = message.meta if isinstance(message, WorkflowMessage) else message.get("meta")
    return isinstance(meta, Mapping) and meta.get(ASKS_PERSON) is True and is_round(_role(message))


def pending_question(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> str | None:
    """The question a chain waits on (its last message asked a person and no answer follows), else None."""
    if messages and asks_person(messages[-1]):
        last = messages[-1]
        return str(last.content if isinstance(last, WorkflowMessage) else last.get("content"))
    return None


APPROVE, REJECT = "approve", "reject"


NO_ANSWER: Any = object()  # a person's answer carrying no structured data (meta has no "answer")


def person_answer(decision: str, note: str | None, by: str, timestamp: int, via: str | None = None,
                  answer: Any = NO_ANSWER) -> WorkflowMessage:
    """The message a person's answer becomes: what the moderator sees next.

    `by` is who answered (git's user.name, else the login name); `via` the way the
    answer came (`nerve thread approve`, `nerve top`, `nerve mcp (client ...)`);
    `answer` a structured answer (in meta, and as JSON text when there is no note).
    """
    if decision not in (APPROVE, REJECT):
        raise ValueError(f"decision must be {APPROVE!r} or {REJECT!r}, got {decision!r}")
    meta: dict[str, Any] = {"decision": decision, "approved": decision == APPROVE, "note": note, "by": by}
    if via is not None:
        meta["via"] = via
    if answer is not NO_ANSWER:
        meta["answer"] = answer
    text = orjson.dumps(answer).decode() if answer is not NO_ANSWER else None
    content = note or text or ("approved" if decision == APPROVE else "rejected")
    return WorkflowMessage(PERSON, content, meta, timestamp)
