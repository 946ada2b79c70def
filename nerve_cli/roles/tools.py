"""Tools a model-backed role may call: plain Python functions, through `llm`'s tools API.

    from nerve_cli.sdk import llm_role, nerve_tools, tool

    agent = llm_role(system="...", tools=[nerve_tools.query_sense, tool(merge_pr, approval=True)])

A tool is a function with type hints and a docstring (llm builds the schema the
model sees from them), or `tool(fn, name=, description=, approval=)`. Every
call is recorded in the role's message meta under `tool_calls`: `{"id", "name",
"arguments", "result" | "error", "started_ms", "duration_ms", "approval"}`
(`started_ms`, epoch: only a call that ran has it). A tool that
raises: its error is the result the model sees ("Error: ...") and the round
goes on. Calls run inside the role's call, so they count against
`role_timeout` (a sync function runs in a thread of its own, which a timeout
abandons); a round asking for more than `max_tool_calls` fails the thread.

A call needing approval (`approval=True`, or a function of the call's
arguments returning True) is not run: the role stops the thread with one
question per such call of the model's turn (`ask_person`, meta `tool_approval`:
the calls and llm's history; `automaton.questions` numbers them). When a person
has settled every one, in any order, the thread goes back to that role at once
(its moderator is not asked; `automaton.waits.tool_continuation`): each
approved call runs — once, even across a restart — each rejected one hands the
model the person's note as its result, and the model goes on with every result
in one call. The conversation so far travels in the question's meta (llm's
message history), so the model resumes where it stopped, on any worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from nerve_cli.automaton.context import current_thread
from nerve_cli.automaton.model import PERSON, TOOL, RoleSetupError, WorkflowMessage
from nerve_cli.automaton.questions import TOOL_APPROVAL, call_question
from nerve_cli.automaton.waits import note_decisions
from nerve_cli.roles.blocking import in_daemon_thread
from nerve_cli.vocab import states

TOOL_CALLS = "tool_calls"  # meta key: every tool call of the round
RECORDED_RESULT = 64 * 1024  # characters of a tool's result kept in the record (the model gets all of it)
Approval = bool | Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class ToolSpec:
    """A function offered to the model, with its name, description and approval rule."""

    function: Callable[..., Any]
    name: str
    description: str | None = None
    approval: Approval = False

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        return bool(self.approval(arguments)) if callable(self.approval) else bool(self.approval)


def tool(function: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         approval: Approval = False) -> Any:
    """Offer `function` to a model as a tool (also a decorator: `@tool(approval=True)`).

    Args:
        name: what the model calls it (default: the function's name).
        description: what the model reads about it (default: the docstring).
        approval: True, or a function of the call's arguments returning True, when a person must allow
            the call before it runs (the thread waits; see the module docstring).
    """
    def make(fn: Callable[..., Any]) -> ToolSpec:
        if not callable(fn):
            raise TypeError(f"tool() takes a function, got {type(fn).__name__}")
        return ToolSpec(fn, name or fn.__name__, description, approval)

    return make(function) if function is not None else make


def as_spec(item: Any) -> ToolSpec:
    """A role's `tools=` entry as a ToolSpec: a ToolSpec, or a plain function."""
    if isinstance(item, ToolSpec):
        return item
    if callable(item) and getattr(item, "__name__", "<lambda>") != "<lambda>":
        return ToolSpec(item, item.__name__)
    raise TypeError(f"llm_role(tools=...) takes functions (with type hints and a docstring) or tool(fn, ...), "
                    f"got {item!r:.80}")


class ToolLimitExceeded(RoleSetupError):
    """A round asked for more tool calls than `max_tool_calls`: the thread fails (retrying would repeat it)."""

    lead = "went past a limit"


@dataclass(frozen=True)
class Decision:
    """A person's answer to a tool call the role asked about (from the TOOL note the runtime persisted)."""

    tool_call_id: str | None
    decision: str  # approve | reject
    note: str | None
    by: str | None
    via: str | None  # how it came: `nerve thread approve`, `nerve top`, `nerve mcp (client ...)`
    interrupted: bool  # approved before, and the role stopped before it answered: not run again

    def outcome(self) -> str | None:
        """What the model gets instead of running the call, or None: run it."""
        if self.interrupted and self.decision == states.Decision.APPROVE:
            return ("Not run: this call was approved, but the worker stopped while acting on it, so it may "
                    "have run already; it is not run again. Check its effect before trying again.")
        if self.decision != states.Decision.APPROVE:
            return f"Rejected by a person: {self.note}" if self.note else "Rejected by a person."
        return None


_CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("nerve_tool_call", default=None)


class ToolRound:
    """One round's tool calls: the llm Tools the chain gets, the cap, the record, a decision to apply."""

    def __init__(self, specs: Sequence[ToolSpec], cap: int, *, sync: bool, can_wait: bool,
                 decisions: Mapping[str, Decision] | None = None) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.cap = cap
        self.sync = sync
        self.can_wait = can_wait
        self.decisions = dict(decisions or {})  # tool_call_id → a person's answer to it
        self.calls: dict[str, dict[str, Any]] = {}  # tool_call_id → its record, in the order they were asked
        self.count = 0

    @property
    def recorded(self) -> list[dict[str, Any]]:
        return list(self.calls.values())

    def after(self, earlier: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The round's record following `earlier` ones (a round a person's answer resumed): the call that
        was asked about takes the place of its earlier record."""
        out = [self.calls.get(str(c.get("id"))) or {**c, "earlier": True} if isinstance(c, dict) else c
               for c in earlier]  # `earlier`: ran (or was asked) in the round's first part, not again now
        shown = {c.get("id") for c in out if isinstance(c, dict)}
        return out + [c for c in self.calls.values() if c.get("id") not in shown]

    def llm_tools(self) -> list[Any]:
        import llm  # the worker running this role has imported it already (roles.llm)

        out = []
        for spec in self.specs.values():
            shape = llm.Tool.function(spec.function, name=spec.name, description=spec.description)
            impl = self._sync_impl(spec) if self.sync else self._async_impl(spec)
            out.append(llm.Tool(name=shape.name, description=shape.description, input_schema=shape.input_schema,
                                implementation=impl))
        return out

    def before_call(self, tool: Any, call: Any) -> None:
        """Called by llm before each call (in the call's own task): count it, start its record."""
        self.count += 1
        if self.count > self.cap:
            raise ToolLimitExceeded(f"the model asked for more than {self.cap} tool calls in one round "
                                    f"(llm_role max_tool_calls={self.cap}); the last was {call.name}")
        self.calls[call.tool_call_id] = {"id": call.tool_call_id, "name": call.name,
                                         "arguments": dict(call.arguments or {})}
        if tool is None:  # llm answers the model itself ("does not exist"); the record says so too
            self.calls[call.tool_call_id]["error"] = f"no tool named {call.name!r} in this role"
        _CALL.set(call)

    # -- the implementations llm calls ------------------------------------------------------------
    def _async_impl(self, spec: ToolSpec) -> Callable[..., Any]:
        async def run(**arguments: Any) -> Any:
            record, instead = self._gate(spec, arguments)
            if instead is not None:
                return instead
            with _running(spec, record) as stopped:
                if stopped is not None:
                    return stopped
                with _recording(record):
                    if inspect.iscoroutinefunction(spec.function):
                        value = await spec.function(**arguments)
                    else:  # a blocking function must not hold the worker's loop (nor survive a role_timeout)
                        value = await in_daemon_thread(lambda: spec.function(**arguments))
                    record["result"] = _recordable(value)
            return value

        return run

    def _sync_impl(self, spec: ToolSpec) -> Callable[..., Any]:
        def run(**arguments: Any) -> Any:
            record, instead = self._gate(spec, arguments)
            if instead is not None:
                return instead
            with _running(spec, record) as stopped:
                if stopped is not None:
                    return stopped
                with _recording(record):
                    value = spec.function(**arguments)
                    if inspect.isawaitable(value):
                        value = asyncio.run(_awaited(value))
                    record["result"] = _recordable(value)
            return value

        return run

    def _gate(self, spec: ToolSpec, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the call's record, what the model gets instead of running it — None: run it now)."""
        import llm

        call = _CALL.get()
        record = self.calls.setdefault(getattr(call, "tool_call_id", None) or f"call-{len(self.calls)}",
                                       {"name": spec.name, "arguments": arguments})
        decided = self.decisions.get(call.tool_call_id) if call is not None else None
        if decided is not None:
            record["approval"] = {"decision": decided.decision, "by": decided.by, "via": decided.via,
                                  "note": decided.note}
            if decided.interrupted:
                record["approval"]["interrupted"] = True
            instead = decided.outcome()
            if instead is not None:
                record["result"] = instead
            return record, instead
        if not self._needs_approval(spec, arguments, record):
            return record, None
        if not self.can_wait:
            instead = ("Not run: this call needs a person's approval, and this round cannot wait for one "
                       "(it acts on the answer to a wait asked at the last round).")
            record["approval"] = {"decision": "refused", "why": "no round left to wait in"}
            record["result"] = instead
            return record, instead
        record["approval"] = {"decision": "asked"}
        raise llm.PauseChain(f"{spec.name} needs a person's approval")

    def _needs_approval(self, spec: ToolSpec, arguments: dict[str, Any], record: dict[str, Any]) -> bool:
        try:
            return spec.needs_approval(arguments)
        except Exception as exc:  # a broken approval rule must not let the call through
            record["approval_rule_error"] = f"{type(exc).__name__}: {exc}"
            return True

    def asks(self, call_id: str | None, name: str, arguments: dict[str, Any]) -> bool:
        """Whether a call of the paused turn is a question for a person: one that asked already, or one that
        never started (a sync turn stops at its first question) and needs approval. Its record says so."""
        record = self.calls.get(call_id or "")
        if record is not None and (record.get("approval") or {}).get("decision") == "asked":
            return True
        spec = self.specs.get(name)
        if record is not None or spec is None or call_id in self.decisions:
            return False
        record = self.calls.setdefault(call_id or f"call-{len(self.calls)}",
                                       {"id": call_id, "name": name, "arguments": dict(arguments)})
        if not self._needs_approval(spec, arguments, record):
            return False
        record["approval"] = {"decision": "asked"}
        return True


@contextmanager
def _running(spec: ToolSpec, record: dict[str, Any]) -> Iterator[str | None]:
    """Around a call about to run: None, and the call counted as running for its thread's cancel to wait
    for; or what the model gets instead, once the thread was cancelled (a sync chain runs on in its own
    thread after the cancel: no call starts then)."""
    info = current_thread()
    if info is None:
        yield None
        return
    ticket = info.halt.begin(spec.name)
    if ticket is None:
        instead = f"Not run: the thread was cancelled ({info.halt.cancelled})."
        record["result"], record["cancelled"] = instead, True
        yield instead
        return
    try:
        yield None
    finally:
        info.halt.end(ticket)


@contextmanager
def _recording(record: dict[str, Any]) -> Iterator[None]:
    """Time the call into its record; an exception is recorded as its error and raised on (llm hands it to
    the model as the result)."""
    started = time.perf_counter()
    record["started_ms"] = round(time.time() * 1000, 1)
    try:
        yield
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        record["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)


async def _awaited(value: Any) -> Any:
    return await value


def _recordable(value: Any) -> Any:
    """The result as JSON the log can keep: as returned when small, else its text cut at RECORDED_RESULT."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)[:RECORDED_RESULT]
    if len(text) <= RECORDED_RESULT:
        return orjson.loads(text)
    return text[:RECORDED_RESULT] + "…"


# -- the thread around an approval ---------------------------------------------------------------------

@dataclass(frozen=True)
class Resumption:
    """What a role needs to go on after a person settled its tool calls: the answers and the saved history."""

    decisions: dict[str, Decision]  # tool_call_id → the person's answer
    history: list[dict[str, Any]]  # llm messages (to_dict) ending in the unanswered calls
    calls: list[dict[str, Any]]  # the tool calls recorded before it stopped


def resumption(messages: Sequence[WorkflowMessage]) -> Resumption | None:
    """Set when the chain ends with a TOOL note: the role is called back about the calls it asked."""
    if not messages or messages[-1].role != TOOL:
        return None
    note = messages[-1].meta
    for message in reversed(messages[:-1]):
        if message.role in (TOOL, PERSON):
            continue
        approval = message.meta.get(TOOL_APPROVAL)
        if not isinstance(approval, Mapping):
            return None
        decisions = {}
        for d in note_decisions(note):
            call = d.get("call") or {}
            decisions[str(call.get("tool_call_id"))] = Decision(
                call.get("tool_call_id"), str(d.get("decision")), d.get("note"), d.get("by"), d.get("via"),
                bool(note.get("interrupted")))
        return Resumption(decisions, list(approval.get("history") or []), list(message.meta.get(TOOL_CALLS) or []))
    return None


def approval_question(calls: Sequence[Mapping[str, Any]], text: str) -> str:
    """The question the tool calls needing approval become (one line per call, then what the model said)."""
    asked = "\n".join(call_question(c) for c in calls)
    return f"{asked}\n\n{text.strip()}" if text.strip() else asked
