"""The JSON-lines protocol between the kernel and its workers, as typed messages.

One message per line, a JSON object with a `type` field. Both sides import this
module; nothing else knows the wire format. `decode` never raises: a malformed
line becomes a `Malformed` value so a reader loop cannot be killed by a worker.

kernel → sense worker:    compute, cancel, shutdown, peer_read
sense worker → kernel:    ready, output, signal, silent, error, thread_owner, child_owner, database_created, fatal,
                          read_peer (dry_run: a rehearsal's answer, to the CLI)
kernel → workflow worker: thread_start, ack, thread_cancel, emit_done, shutdown
workflow worker → kernel: ready, thread_message, role_failed, thread_end, thread_emit
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

import orjson

from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND, Reason
from nerve_cli.vocab.states import ThreadStatus

# the limits live apart so the CLI reads them without this module; the protocol's users import them from here too
from nerve_cli.wire.limits import LOG_PREFIX, MAX_LINE, MAX_PAYLOAD, payload_too_large  # noqa: F401


@dataclass(frozen=True)
class ErrorInfo:
    """A failure inside user code, as the user needs to see it."""

    type: str
    message: str
    traceback: str = ""
    file: str | None = None
    line: int | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""

    def summary(self) -> str:
        at = f" at {self.where()}" if self.file else ""
        return f"{self.type}: {self.message}{at}"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback,
                "file": self.file, "line": self.line}


@dataclass(frozen=True)
class Message:
    type: ClassVar[str] = ""

    def encode(self) -> bytes:
        # orjson encodes nested dataclasses (ErrorInfo) itself; asdict's deep copy cost 3-7 us a message
        body = {"type": self.type, **self.__dict__}
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)


# kernel → worker ---------------------------------------------------------

@dataclass(frozen=True)
class Compute(Message):
    type: ClassVar[str] = "compute"
    id: int
    sense: str
    reason: Reason = DEMAND  # kind and source, as two fields on the wire
    # the sense's `on:` sources, name → "sense" | "channel" | "file"; a compute that takes `trigger` reads them
    sources: dict[str, str] | None = None
    dry_run: bool = False  # compute, report what it would write, roll everything back: answered with DryRun
    sample: list[dict[str, Any]] | None = None  # a dry run's events ({source, kind, payload}) instead of the real ones
    # source → {payload key: wanted value(s)}: only those of its events (the sense's bindings, values bound)
    filters: dict[str, dict[str, Any]] | None = None
    # a read of a sense with parameters: their values; its cursors and value are that set's (store.bindings)
    bind: dict[str, Any] | None = None


@dataclass(frozen=True)
class Cancel(Message):
    """Soft timeout: abandon compute `id` and roll it back; no answer is expected beyond the usual one."""

    type: ClassVar[str] = "cancel"
    id: int


@dataclass(frozen=True)
class Shutdown(Message):
    type: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class ThreadStart(Message):
    """Run (or resume) a thread. `messages` is the persisted chain, starting with the start message."""

    type: ClassVar[str] = "thread_start"
    run_id: str
    workflow: str
    messages: list[dict[str, Any]]
    max_rounds: int
    role_timeout: float | None = None  # seconds one role call may take (workflows.<name>.role_timeout)
    role_retries: int = 0  # extra attempts for a role that raises or times out
    role_backoff: float = 1.0  # first pause before a retry (doubles, with jitter)
    model: str | None = None  # workflows.<name>.model: the default model of model-backed roles
    system: str | None = None  # workflows.<name>.system: their default system prompt


@dataclass(frozen=True)
class Ack(Message):
    """The kernel has persisted message `seq` of `run_id`; the thread may take its next step."""

    type: ClassVar[str] = "ack"
    run_id: str
    seq: int


@dataclass(frozen=True)
class ThreadCancel(Message):
    type: ClassVar[str] = "thread_cancel"
    run_id: str
    reason: str


@dataclass(frozen=True)
class PeerRead(Message):
    """The lazy peer asked for in `ReadPeer` number `request` is up to date (or could not be: `error`)."""

    type: ClassVar[str] = "peer_read"
    request: int
    error: str | None = None


@dataclass(frozen=True)
class EmitDone(Message):
    """The answer to a thread's `thread_emit`: the stored event, or why it was refused (`error`)."""

    type: ClassVar[str] = "emit_done"
    run_id: str
    request: int
    event_id: int | None = None
    duplicate: bool = False  # its key was stored before: this is the earlier event
    triggered: list[str] = field(default_factory=list)  # the senses it woke
    error: str | None = None


# worker → kernel ---------------------------------------------------------

@dataclass(frozen=True)
class Ready(Message):
    """Worker loaded. `senses` are usable; `failed` maps a sense that could not load to why."""

    type: ClassVar[str] = "ready"
    pid: int
    senses: list[str] = field(default_factory=list)
    failed: dict[str, ErrorInfo] = field(default_factory=dict)
    takes_trigger: list[str] = field(default_factory=list)  # senses whose compute receives events
    created: list[str] = field(default_factory=list)  # senses whose database was missing: made empty now


@dataclass(frozen=True)
class Signal(Message):
    """Compute `id` returned a value; it is committed with its `_signals` row."""

    type: ClassVar[str] = "signal"
    id: int
    sense: str
    payload: Any
    ts: int
    duration_ms: float
    workflow: str | None = None
    signal_id: int | None = None  # its `_signals` row: the event id its listeners receive
    events: int = 0  # events this compute consumed
    more: bool = False  # events beyond this compute's batch still wait
    # sources rebuilt since its cursor was counted, read again from their start: {source, was_at, identity_*}
    restarted: list[dict[str, Any]] = field(default_factory=list)
    consumed: list[dict[str, Any]] = field(default_factory=list)  # per source: {source, count, first, last}
    emits: list[dict[str, Any]] = field(default_factory=list)  # committed with it: {id, channel, payload, key}
    # epoch seconds its transaction ended in the worker (0: not said): an interval counts from there
    ended: float = 0.0


@dataclass(frozen=True)
class Silent(Message):
    """Compute `id` emitted no signal: None rolled its rows back, KEEP (`kept`) committed them."""

    type: ClassVar[str] = "silent"
    id: int
    sense: str
    duration_ms: float
    kept: bool = False
    events: int = 0  # events this compute consumed (its cursor advanced past them either way)
    more: bool = False
    restarted: list[dict[str, Any]] = field(default_factory=list)  # as Signal.restarted
    consumed: list[dict[str, Any]] = field(default_factory=list)  # as Signal.consumed
    emits: list[dict[str, Any]] = field(default_factory=list)  # as Signal.emits
    ended: float = 0.0  # as Signal.ended


@dataclass(frozen=True)
class Error(Message):
    """Compute `id` failed; everything it wrote was rolled back."""

    type: ClassVar[str] = "error"
    id: int
    sense: str
    error: ErrorInfo
    duration_ms: float
    ended: float = 0.0  # as Signal.ended


@dataclass(frozen=True)
class DryRun(Message):
    """Dry run `id` ended and was rolled back: what it would have signalled and written."""

    type: ClassVar[str] = "dry_run"
    id: int
    sense: str
    outcome: Outcome  # signal | silent | error
    duration_ms: float
    kept: bool = False  # silent, its rows kept (KEEP)
    payload: Any = None
    workflow: str | None = None
    error: ErrorInfo | None = None
    tables: dict[str, Any] = field(default_factory=dict)  # table → {inserted, updated, deleted, rows[{op, row}]}
    cursors: dict[str, list[int]] = field(default_factory=dict)  # source → [from, to]: where they would move
    events: int = 0  # events the compute was given
    blobs: dict[str, int] = field(default_factory=dict)  # sha256 → bytes it would have put
    copy: bool = False  # computed on an in-memory copy (no database yet, or migrations pending)
    emits: list[dict[str, Any]] = field(default_factory=list)  # what it would emit: {id, channel, payload, key}


@dataclass(frozen=True)
class ReadPeer(Message):
    """A compute of `sense` reads `peer`, a lazy sense: bring it up to date (for `bind`'s values) first.

    The compute waits for the `PeerRead` with the same `request` number (unique within the worker)."""

    type: ClassVar[str] = "read_peer"
    request: int
    sense: str
    peer: str
    bind: dict[str, Any] | None = None


@dataclass(frozen=True)
class Output(Message):
    """A line compute `id` printed (stdout or stderr); every one is sent before the compute's answer."""

    type: ClassVar[str] = "output"
    id: int
    sense: str
    stream: str  # stdout | stderr
    text: str


@dataclass(frozen=True)
class ThreadOwner(Message):
    """A thread a sense's code started (at import, in a compute, or from another of its threads): whose it is."""

    type: ClassVar[str] = "thread_owner"
    ident: int  # threading.get_ident(): what faulthandler names as "Thread 0x..."
    native_id: int  # the OS thread id (/proc/PID/task/ID): what its CPU time is counted under
    sense: str


@dataclass(frozen=True)
class ChildOwner(Message):
    """A process a sense's code started (os.fork, subprocess): whose it is."""

    type: ClassVar[str] = "child_owner"
    pid: int
    sense: str


@dataclass(frozen=True)
class DatabaseCreated(Message):
    """A sense's database was made empty from its migrations: missing at load, or deleted while it ran."""

    type: ClassVar[str] = "database_created"
    sense: str
    why: str


@dataclass(frozen=True)
class Fatal(Message):
    """A sense's code is about to end its worker or cut it off from the kernel (`what` it called)."""

    type: ClassVar[str] = "fatal"
    sense: str
    what: str


@dataclass(frozen=True)
class ThreadMessage(Message):
    """Message number `seq` of a thread's chain (0 is the start message)."""

    type: ClassVar[str] = "thread_message"
    run_id: str
    seq: int
    message: dict[str, Any]


@dataclass(frozen=True)
class RoleFailed(Message):
    """Attempt `attempt` of `attempts` of a role failed and will be retried in `retry_in_s` seconds."""

    type: ClassVar[str] = "role_failed"
    run_id: str
    role: str
    attempt: int
    attempts: int
    reason: str
    retry_in_s: float
    error: dict[str, Any] | None = None  # the failure: type, message, traceback, file, line


@dataclass(frozen=True)
class ThreadEnd(Message):
    type: ClassVar[str] = "thread_end"
    run_id: str
    # completed | failed | waiting (a role asked a person; reason is the question); a status this kernel does
    # not know stays text, and the thread fails naming it
    status: ThreadStatus | str
    reason: str
    error: dict[str, Any] | None = None  # user code's failure (type, message, traceback, file, line)


@dataclass(frozen=True)
class ThreadEmit(Message):
    """A thread's role emits an event (the ready-made `emit` tool): stored as `nerve emit` stores one."""

    type: ClassVar[str] = "thread_emit"
    run_id: str
    request: int  # numbers the thread's requests: the answer (EmitDone) carries it back
    channel: str
    payload: Any = None
    key: str | None = None


@dataclass(frozen=True)
class Malformed:
    """A line that is not a valid message; the reader logs it and carries on."""

    line: bytes
    problem: str


_TYPES: dict[str, type[Message]] = {
    cls.type: cls
    for cls in (Compute, Cancel, Shutdown, PeerRead, ThreadStart, Ack, ThreadCancel, EmitDone,
                Ready, Output, Signal, Silent, Error, DryRun, ThreadOwner, ChildOwner, DatabaseCreated, Fatal,
                ReadPeer, ThreadMessage, RoleFailed, ThreadEnd, ThreadEmit)
}


_STATUSES = frozenset(ThreadStatus)

_FACTORY = object()  # a default made per message (a list): `_quick_init`


def _quick_init(cls: type) -> None:
    """Give `cls` the __init__ its dataclass made, but setting the fields in one `__dict__.update`: a frozen
    dataclass's own sets each through object.__setattr__, and a worker makes a Signal and the kernel a Compute
    on every hop. Same parameters, defaults and factories; the instance stays frozen (assignment still raises)."""
    params: list[str] = []
    body: list[str] = []
    scope: dict[str, Any] = {"_FACTORY": _FACTORY}
    for f in fields(cls):
        if f.default is not MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            scope[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY: {f.name} = _f_{f.name}()")
        else:
            params.append(f.name)
    names = [f.name for f in fields(cls)]
    body.append("    self.__dict__.update({" + ", ".join(f"{n!r}: {n}" for n in names) + "})")
    source = f"def __init__(self, {', '.join(params)}) -> None:\n" + "\n".join(body) + "\n"
    exec(source, scope)  # (how dataclasses makes its own)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]


for _cls in _TYPES.values():
    _quick_init(_cls)


class _Shape:
    """A message class's fields as `decode` fills them: the names, and each absent one's default or factory."""

    def __init__(self, cls: type[Message]) -> None:
        self.names = frozenset(f.name for f in fields(cls))
        self.defaults: dict[str, tuple[Any, Any]] = {}  # name → (default, factory), MISSING when none
        for f in fields(cls):
            self.defaults[f.name] = (f.default, f.default_factory)

    def make(self, cls: type[Message], body: dict[str, Any]) -> Message:
        """`cls(**body)` without the call: a line carries every field in order (`encode`), so the common case
        is one subset test and a dict copy (0.3 us against 1 us for a Compute, made on every hop)."""
        if not body.keys() <= self.names:
            raise TypeError(f"unknown field(s) {', '.join(sorted(body.keys() - self.names))}")
        if len(body) < len(self.names):
            for name in self.names - body.keys():
                default, factory = self.defaults[name]
                if default is not MISSING:
                    body[name] = default
                elif factory is not MISSING:
                    body[name] = factory()
                else:
                    raise TypeError(f"missing field {name}")
        message = object.__new__(cls)
        message.__dict__.update(body)  # (frozen: as its __init__ sets them, `_quick_init`)
        return message


_SHAPES = {cls: _Shape(cls) for cls in _TYPES.values()}


def decode(line: bytes) -> Message | Malformed:
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return Malformed(line[:200], f"not JSON: {exc}")
    if not isinstance(body, dict):
        return Malformed(line[:200], "not a JSON object")
    cls = _TYPES.get(body.pop("type", None))
    if cls is None:
        return Malformed(line[:200], "unknown or missing message type")
    try:
        if cls in (Error, DryRun) and isinstance(body.get("error"), dict):
            body["error"] = ErrorInfo(**body["error"])
        if cls is DryRun:
            body["outcome"] = Outcome(str(body.get("outcome")))
        if cls is Compute and "reason" in body:
            if not isinstance(body["reason"], dict):
                return Malformed(line[:200], "bad fields for compute: reason is not {kind, source}")
            body["reason"] = Reason.from_wire(body["reason"])
        if cls is ThreadEnd and body.get("status") in _STATUSES:
            body["status"] = ThreadStatus(body["status"])
        if cls is Ready and isinstance(body.get("failed"), dict):
            body["failed"] = {k: ErrorInfo(**v) for k, v in body["failed"].items()}
        return _SHAPES[cls].make(cls, body)
    except (TypeError, ValueError, KeyError) as exc:
        return Malformed(line[:200], f"bad fields for {cls.type}: {exc}")
