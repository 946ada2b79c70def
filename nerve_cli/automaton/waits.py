"""What a thread can wait for: a person's answer (`ask_person`) or an event (`wait_for_event`).

A role ends its round by returning one of them instead of a plain RoleResult.
The message it becomes carries the wait in its meta, so the chain alone says
what a thread waits for: a restarted engine reads it back from the log.

An event wait names a source (an external channel, or a sense whose signals
count) and a `match`: each key is a field of the event's payload (a dotted
path reaches into nested objects: `"pull_request.number"`) and its value the
one that field must equal (JSON equality: `1` is not `true`, `7` is `7.0`).
The first event of that source committed since the round that asked began and
matching every key resumes the thread, with the event as the next message
(role EVENT, payload in `meta`); with a `timeout`, a thread no event resumed
in time resumes with a message saying so (`meta.timed_out` true).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from nerve_cli.automaton.model import (
    ANSWER_SCHEMA,
    ASKS_PERSON,
    EVENT,
    TOOL,
    M,
    RoleResult,
    WorkflowMessage,
    is_round,
)
from nerve_cli.automaton.questions import QUESTIONS, TOOL_APPROVAL, Question, build, open_questions, settled
from nerve_cli.names import channel_problem
from nerve_cli.vocab import states
from nerve_cli.vocab.states import WaitKind

WAITS_FOR_EVENT = "wait_for_event"  # meta key of a role's message that waits for an event: the EventWait
SLEEPS = "sleeps"  # meta key of a role's message that sleeps: the TimeWait
MAX_TIMEOUT = 366 * 86400.0  # a wait longer than a year is a mistake (and would overflow a timer)
SHOWN_PAYLOAD = 2000  # characters of an event's payload shown in the content of the message it becomes


@dataclass(frozen=True)
class PersonWait:
    """The thread waits for `nerve thread approve|reject`: its open `questions` (each with its id; an answer
    matching its schema, when it has one). `question` and `schema`: the one open question's, or a summary."""

    question: str
    schema: Mapping[str, Any] | None = None
    questions: tuple[Question, ...] = ()

    @classmethod
    def of(cls, questions: Sequence[Question]) -> PersonWait:
        if len(questions) == 1:
            return cls(questions[0].text, questions[0].schema, tuple(questions))
        heads = "; ".join(f"{q.id}: {(q.text.strip().splitlines() or [''])[0]}" for q in questions)
        return cls(f"{len(questions)} questions: {heads}", None, tuple(questions))

    def describe(self) -> str:
        return self.question

    def to_dict(self) -> dict[str, Any]:
        return {"kind": WaitKind.PERSON.value, "question": self.question, "schema": self.schema,
                "questions": [q.to_dict() for q in self.questions]}


@dataclass(frozen=True)
class EventWait:
    """The thread waits for the first event of `source` matching `match`, committed from `since_ms` on."""

    source: str
    match: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    since_ms: int = 0  # the round that asked began then: an event committed while it ran counts

    def describe(self) -> str:
        """`ci.done where pr = 7 (timeout 1h)`."""
        text = self.source
        if self.match:
            text += " where " + " and ".join(f"{k} = {_json(v)}" for k, v in self.match.items())
        if self.timeout_s is not None:
            text += f" (timeout {_duration(self.timeout_s)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"kind": WaitKind.EVENT.value, "source": self.source, "match": dict(self.match), "timeout_s": self.timeout_s,
                "since_ms": self.since_ms}

    @classmethod
    def from_dict(cls, data: Any) -> EventWait:
        """From a message's meta; ValueError when it is not one (a log edited by hand)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an event wait must be an object, got {type(data).__name__}")
        source, match, timeout, since = (data.get(k) for k in ("source", "match", "timeout_s", "since_ms"))
        return cls(_source(source), _match(match), _timeout(timeout), since if isinstance(since, int) else 0)


@dataclass(frozen=True)
class TimeWait:
    """The thread sleeps `seconds` (a role returned `sleep(...)`): time alone resumes it."""

    seconds: float

    def describe(self) -> str:
        return f"time: sleeps {_duration(self.seconds)}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": WaitKind.TIME.value, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: Any) -> TimeWait:
        """From a message's meta; ValueError when it is not one (a log edited by hand)."""
        seconds = data.get("seconds") if isinstance(data, Mapping) else None
        return cls(_sleep_seconds(seconds))


Wait = PersonWait | EventWait | TimeWait


@dataclass(frozen=True)
class Sleep(RoleResult[M]):
    """What a role returns to end its round sleeping (see `sleep`)."""

    wait: TimeWait


def sleep(duration: float | str, meta: Mapping[str, Any] | None = None) -> Sleep[Any]:
    """End this round sleeping: the thread resumes after `duration` (seconds or `"2h"`, `"10m"`), with a message
    saying it slept. It holds no worker or slot meanwhile and sleeps on across engine restarts (as Temporal's
    timers and Inngest's `step.sleep`)."""
    wait = TimeWait(_sleep_seconds(duration))
    return Sleep(f"sleeps {_duration(wait.seconds)}", dict(meta or {}), wait)


def _sleep_seconds(value: Any) -> float:
    if isinstance(value, str):
        from nerve_cli.config.model import parse_duration  # the one duration grammar; only a sleep given text pays

        seconds = parse_duration(value)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"sleep: the duration is seconds or text like '2h', got {value!r:.60}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError(f"sleep: the duration must be above 0 and at most 366d, got {value!r:.60}")
    return seconds


def slept_message(wait: TimeWait, timestamp: int) -> WorkflowMessage:
    """The sleep is over: the next message of the chain says so (meta.slept_s)."""
    meta = {"source": "sleep", "slept_s": wait.seconds, "timed_out": True, "payload": None}
    return WorkflowMessage(EVENT, f"slept {_duration(wait.seconds)}", meta, timestamp)


@dataclass(frozen=True)
class WaitForEvent(RoleResult[M]):
    """What a role returns to end its round waiting for an event (see `wait_for_event`)."""

    wait: EventWait


def wait_for_event(source: str, match: Mapping[str, Any] | None = None, timeout: float | str | None = None,
                   meta: Mapping[str, Any] | None = None) -> WaitForEvent[Any]:
    """End this round waiting for an event; the thread resumes with it as the next message.

    Args:
        source: an external channel (`nerve emit NAME`) or a sense (its signals).
        match: payload fields (dotted paths reach nested objects) and the values they must equal;
            none: any event of the source.
        timeout: seconds or a duration (`"10m"`, `"2h"`); when it passes first, the thread resumes
            with a message saying so (`meta["timed_out"]` true). None: wait as long as it takes.
        meta: the round's own meta, kept on its message.

    The thread holds no worker slot while it waits and survives engine restarts.
    """
    wait = EventWait(_source(source), _match(match), _timeout(timeout))
    return WaitForEvent(f"waits for {wait.describe()}", dict(meta or {}), wait)


def matches(payload: Any, match: Mapping[str, Any]) -> bool:
    """True when every field of `match` is in `payload` with an equal value."""
    for path, wanted in match.items():
        value = payload
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        if not _equal(value, wanted):
            return False
    return True


def pending_wait(messages: Sequence[WorkflowMessage] | Sequence[Mapping[str, Any]]) -> Wait | None:
    """What the chain waits for (its last message asked and nothing answered yet), else None."""
    if not messages:
        return None
    last = messages[-1]
    role, content, meta = ((last.role, last.content, last.meta) if isinstance(last, WorkflowMessage)
                           else (last.get("role"), last.get("content"), last.get("meta")))
    if not isinstance(meta, Mapping):
        return None
    open_ = open_questions(messages)
    if open_:
        return PersonWait.of(open_)
    if not is_round(role):
        return None
    if WAITS_FOR_EVENT in meta:
        return EventWait.from_dict(meta[WAITS_FOR_EVENT])
    if SLEEPS in meta:
        return TimeWait.from_dict(meta[SLEEPS])
    return None


def wait_meta(result: RoleResult[Any], meta: dict[str, Any], round_started_ms: int, first_question: int = 1) -> None:
    """Mark the meta of a role's message that waits (the round began at `round_started_ms`; its questions
    are numbered from `q{first_question}`)."""
    if isinstance(result, WaitForEvent):
        wait = EventWait(result.wait.source, result.wait.match, result.wait.timeout_s, round_started_ms)
        meta[WAITS_FOR_EVENT] = wait.to_dict()
    elif isinstance(result, Sleep):
        meta[SLEEPS] = result.wait.to_dict()
    else:
        meta[ASKS_PERSON] = True
        schema = getattr(result, "schema", None)
        if schema is not None:
            meta[ANSWER_SCHEMA] = schema
        meta[QUESTIONS] = build(meta, result.content, first_question)


def event_message(wait: EventWait, event_id: int, kind: str, ts: int, payload: Any, timestamp: int) -> WorkflowMessage:
    """The event that resumed a wait, as the next message of the chain (the moderator reads meta.payload)."""
    shown = _json(payload)
    if len(shown) > SHOWN_PAYLOAD:
        shown = shown[:SHOWN_PAYLOAD] + "…"
    meta = {"source": wait.source, "kind": kind, "event_id": event_id, "ts": ts, "payload": payload,
            "match": dict(wait.match), "timed_out": False}
    return WorkflowMessage(EVENT, f"{wait.source} #{event_id}: {shown}", meta, timestamp)


def timeout_message(wait: EventWait, timestamp: int) -> WorkflowMessage:
    """No event resumed the wait within its timeout: the next message says so (meta.timed_out true)."""
    waited = _duration(wait.timeout_s or 0)
    what = wait.source + (" where " + " and ".join(f"{k} = {_json(v)}" for k, v in wait.match.items())
                          if wait.match else "")
    meta = {"source": wait.source, "match": dict(wait.match), "timed_out": True, "timeout_s": wait.timeout_s,
            "payload": None}
    return WorkflowMessage(EVENT, f"timed out: no {what} event within {waited}", meta, timestamp)


def _source(value: Any) -> str:
    problem = channel_problem(value)
    if problem is not None:
        raise ValueError(f"wait_for_event: the source must be a channel or a sense name: {problem} ({value!r:.60})")
    return value


def _match(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"wait_for_event: match must be a dict of payload field -> value, got "
                         f"{type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise ValueError(f"wait_for_event: match keys are payload field names (a dotted path for a nested "
                             f"field, e.g. 'pull_request.number'), got {key!r:.60}")
    try:
        return orjson.loads(orjson.dumps(dict(value)))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValueError(f"wait_for_event: match values must be JSON values: {exc}") from None


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        from nerve_cli.config.model import parse_duration  # the one duration grammar; only a wait given text pays

        seconds = parse_duration(value)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"wait_for_event: timeout is seconds or a duration like '10m', got {value!r:.60}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError(f"wait_for_event: timeout must be above 0 and at most 366d, got {value!r:.60}")
    return seconds


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers, 7 equals 7.0, objects and arrays compare by content."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _duration(seconds: float) -> str:
    from nerve_cli.config.model import format_duration  # the one duration grammar; only a wait with a timeout pays

    return format_duration(seconds)


def tool_continuation(messages: Sequence[WorkflowMessage], clock: Callable[[], int]) -> tuple[str, WorkflowMessage] | None:
    """(role, note) when the chain must go back to the role that asked a person to allow tool calls.

    A person settled every question of the role's round (one per tool call, answered in any order): that
    role is called again at once (its moderator is not asked), after `note` — a TOOL message saying what was
    decided for each call — is persisted, so each call runs at most once: a note at the end of the chain
    means the role began acting on the decisions and never answered (its worker stopped); the next note
    says the approved calls are not run again. None otherwise.
    """
    done = settled(messages)
    if done is not None:
        index, answers = done
        ask = messages[index]
        if TOOL_APPROVAL in ask.meta:
            decisions: list[dict[str, Any]] = [{"call": dict(q.call or {}), "question": q.id,
                          "decision": "approve" if vote.meta.get("approved") else "reject",
                          "note": vote.meta.get("note"), "by": vote.meta.get("by"), "via": vote.meta.get("via")}
                         for q, vote in answers]
            meta = {"role": ask.role, "decisions": decisions, "interrupted": False}
            text = "; ".join(f"{'approved' if d['decision'] == states.Decision.APPROVE else 'rejected'}: {_call_text(d['call'])}"
                             for d in decisions)
            return ask.role, WorkflowMessage(TOOL, text, meta, clock())
    if messages and messages[-1].role == TOOL and isinstance(messages[-1].meta.get("role"), str):
        last = messages[-1]
        meta = {**last.meta, "interrupted": True}
        shown = [_call_text(d.get("call") or {}) for d in note_decisions(last.meta)]
        text = (f"not run again: {', '.join(shown)} answered and its role stopped before it answered "
                "(its worker stopped)")
        return last.meta["role"], WorkflowMessage(TOOL, text, meta, clock())
    return None


def note_decisions(note: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The decisions of a TOOL note: one per call (a note from before several calls has one)."""
    decisions = note.get("decisions")
    if isinstance(decisions, list):
        return [d for d in decisions if isinstance(d, Mapping)]
    return [{"call": note.get("call") or {}, "decision": note.get("decision"), "note": note.get("note"),
             "by": note.get("by"), "via": note.get("via")}]


def _call_text(call: Mapping[str, Any]) -> str:
    return f"{call.get('name')}({_json(call.get('arguments') or {})})"
