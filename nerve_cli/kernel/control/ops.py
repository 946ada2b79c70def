"""The control socket's requests and answers as typed values, as the worker wire's messages are.

A request line is decoded once, here (`parse`): its shape is checked (a wrong
field is a `NerveError` naming it, answered `{"ok": false, ...}`), and the
handler in `requests` gets a frozen value, never the dict. What a request
means for the engine's state (no such sense, a quarantined one) is the
handler's to judge. Answers the kernel builds are values too, encoded by
`to_dict` into the documents the clients read (unchanged on the wire).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.errors import NerveError
from nerve_cli.store import answers
from nerve_cli.vocab.states import Decision

MAX_ORIGIN_FIELDS, MAX_ORIGIN_TEXT = 8, 200
BY_SOCKET = "control socket"  # who asked, when a request does not say


@dataclass(frozen=True)
class Request:
    op: ClassVar[str] = ""

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Request:
        return cls()


@dataclass(frozen=True)
class Ping(Request):
    op: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Status(Request):
    op: ClassVar[str] = "status"


@dataclass(frozen=True)
class Compute(Request):
    """Compute a sense now (with parameter values), answered with its outcome; `timeout` in seconds."""

    op: ClassVar[str] = "compute"
    sense: Any  # checked against the engine's senses by the handler
    bind: dict[str, Any] | None = None
    timeout: Any = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Compute:
        return cls(body.get("sense"), _bind(body.get("bind")), body.get("timeout"))


@dataclass(frozen=True)
class Read(Compute):
    """Bring a lazy sense up to date (for these parameter values)."""

    op: ClassVar[str] = "read"


@dataclass(frozen=True)
class Emit(Request):
    op: ClassVar[str] = "emit"
    channel: Any
    payload: Any = None
    key: Any = None
    schema_version: Any = None
    hashed: bool = False
    traceparent: Any = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Emit:
        hashed = body.get("hash", False)
        if not isinstance(hashed, bool):
            raise NerveError(f"emit: hash is true (store the payload's content hash) or false, got {hashed!r}")
        return cls(body.get("channel"), body.get("payload"), body.get("key"), body.get("schema_version"), hashed,
                   body.get("traceparent"))


@dataclass(frozen=True)
class EventsStored(Request):
    """`nerve emit` stored events itself while the engine was starting (on `channel`, None: some channel)."""

    op: ClassVar[str] = "events_stored"
    channel: str | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> EventsStored:
        channel = body.get("channel")
        return cls(channel if isinstance(channel, str) else None)


@dataclass(frozen=True)
class Replayed(Request):
    """`nerve sense replay` moved a listener's cursor back."""

    op: ClassVar[str] = "replayed"
    sense: Any

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Replayed:
        return cls(body.get("sense"))


@dataclass(frozen=True)
class Reset(Replayed):
    """Lift a sense's penalty or quarantine."""

    op: ClassVar[str] = "reset"


@dataclass(frozen=True)
class StartThread(Request):
    op: ClassVar[str] = "start_thread"
    workflow: str
    prompt: str
    max_rounds: Any = None
    origin: dict[str, str] = field(default_factory=lambda: {"by": BY_SOCKET})

    @classmethod
    def parse(cls, body: dict[str, Any]) -> StartThread:
        workflow, prompt = body.get("workflow"), body.get("prompt")
        if not isinstance(workflow, str) or not isinstance(prompt, str):
            raise NerveError("start_thread needs a workflow name and a prompt")
        return cls(workflow, prompt, body.get("max_rounds"), _origin(body.get("origin")))


@dataclass(frozen=True)
class AnswerThread(Request):
    """A person's answer to a waiting thread: {"run_id", "decision": "approve"|"reject", "question"? (its id;
    none: every open question), "note"?, "by"?, "via"?, "answer"?}, as the store's one answer value."""

    op: ClassVar[str] = "answer_thread"
    answer: answers.Answer

    @classmethod
    def parse(cls, body: dict[str, Any]) -> AnswerThread:
        run_id, decision, note = body.get("run_id"), body.get("decision"), body.get("note")
        if not isinstance(run_id, str) or decision not in tuple(Decision):
            raise NerveError('answer_thread needs a run_id and a decision, "approve" or "reject"')
        if note is not None and not isinstance(note, str):
            raise NerveError("answer_thread: note must be a string")
        question = body.get("question")
        if question is not None and not isinstance(question, str):
            raise NerveError("answer_thread: question is a question's id (a string such as q2)")
        by, via = body.get("by"), body.get("via")
        by = by if isinstance(by, str) else BY_SOCKET
        via = via if isinstance(via, str) else BY_SOCKET
        return cls(answers.Answer(run_id, Decision(decision), by[:MAX_ORIGIN_TEXT], via[:MAX_ORIGIN_TEXT], note,
                                  body["answer"] if "answer" in body else NO_ANSWER, question))


@dataclass(frozen=True)
class CancelThread(Request):
    op: ClassVar[str] = "cancel_thread"
    run_id: str
    reason: str | None = None
    by: str = BY_SOCKET
    via: str | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> CancelThread:
        run_id, reason = body.get("run_id"), body.get("reason")
        if not isinstance(run_id, str) or not (reason is None or isinstance(reason, str)):
            raise NerveError("cancel_thread needs a run_id, and a reason (a string) if any")
        return cls(run_id, reason, *_who(body))


@dataclass(frozen=True)
class RerunThread(Request):
    op: ClassVar[str] = "rerun_thread"
    run_id: str
    from_round: int | None = None
    message: str | None = None
    by: str = BY_SOCKET
    via: str | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> RerunThread:
        run_id, from_round, message = body.get("run_id"), body.get("from_round"), body.get("message")
        if not isinstance(run_id, str) or not (from_round is None or (isinstance(from_round, int)
                                                                      and not isinstance(from_round, bool))):
            raise NerveError("rerun_thread needs a run_id, and from_round (a whole number) if any")
        if message is not None and not isinstance(message, str):
            raise NerveError("rerun_thread: message must be a string")
        return cls(run_id, from_round, message, *_who(body))


@dataclass(frozen=True)
class PauseThread(Request):
    """Pause a live thread (`resume`: false) or resume a paused one."""

    op: ClassVar[str] = "pause_thread"
    run_id: str
    resume: bool = False
    by: str = BY_SOCKET
    via: str | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> PauseThread:
        run_id, resume = body.get("run_id"), body.get("resume", False)
        if not isinstance(run_id, str) or not isinstance(resume, bool):
            raise NerveError("pause_thread needs a run_id, and resume (true or false) if any")
        return cls(run_id, resume, *_who(body))


@dataclass(frozen=True)
class PauseSense(Request):
    """Pause senses (`resume`: false) or resume them: named, or every sense of a group."""

    op: ClassVar[str] = "pause_sense"
    senses: tuple[str, ...] = ()
    group: str | None = None
    resume: bool = False
    by: str = BY_SOCKET
    via: str | None = None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> PauseSense:
        senses, group, resume = body.get("senses") or [], body.get("group"), body.get("resume", False)
        if (not isinstance(senses, list) or not all(isinstance(s, str) for s in senses)
                or not (group is None or isinstance(group, str)) or not isinstance(resume, bool)
                or bool(senses) == (group is not None)):
            raise NerveError("pause_sense needs senses (a list of names) or a group, and resume (true or false)")
        return cls(tuple(senses), group, resume, *_who(body))


REQUESTS: dict[str, type[Request]] = {cls.op: cls for cls in (
    Ping, Status, Compute, Read, Emit, EventsStored, Replayed, Reset, StartThread, AnswerThread, CancelThread,
    RerunThread, PauseThread, PauseSense)}


# answers ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    def to_dict(self) -> dict[str, Any]:
        # the fields as they are (an answer holds names, numbers and lists of names): dataclasses.asdict copies
        # every value deeply, 3% of the engine's time under a stream of emits
        return dict(self.__dict__)


@dataclass(frozen=True)
class Pong(Answer):
    pid: int


@dataclass(frozen=True)
class Emitted(Answer):
    """The event is committed (and its listeners woken)."""

    channel: str
    event_id: int
    ts: int
    duplicate: bool
    triggered: list[str]
    schema_version: str | None
    hash: str | None


@dataclass(frozen=True)
class Logged(Answer):
    logged: int  # log rows written for events stored without the engine


@dataclass(frozen=True)
class SenseNamed(Answer):
    sense: str


@dataclass(frozen=True)
class WasReset(Answer):
    sense: str
    was_blocked: bool


@dataclass(frozen=True)
class Document(Answer):
    """An answer that is a document another part builds (a compute's outcome, a thread's, the status)."""

    document: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.document


def _bind(bind: Any) -> dict[str, Any] | None:
    if bind is not None and not isinstance(bind, dict):
        raise NerveError(f"bind is an object of parameter values, got {bind!r}")
    return bind


def _origin(given: Any) -> dict[str, str]:
    """Where a thread started through the socket came from: the client's own account (`kind`, `by`, `via`,
    `client`: short text), else "control socket"."""
    if not isinstance(given, dict) or not given:
        return {"by": BY_SOCKET}
    if len(given) > MAX_ORIGIN_FIELDS or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 40 and len(v) <= MAX_ORIGIN_TEXT
            for k, v in given.items()):
        raise NerveError(f"start_thread: origin is at most {MAX_ORIGIN_FIELDS} short text fields, "
                         'e.g. {"kind": "mcp", "by": "ada"}')
    return dict(given)


def _who(body: dict[str, Any]) -> tuple[str, str | None]:
    """Who asked (`by`, else "control socket") and how (`via`, a command or client), as answers record them."""
    by, via = body.get("by"), body.get("via")
    return (by if isinstance(by, str) else BY_SOCKET), (via if isinstance(via, str) else None)
