"""The thread automaton: moderator → role → append → … until END or maxRounds.

`run_thread` is the whole loop. It starts from any persisted chain (the start
message alone for a new thread, more for a resumed one) and hands each new
message to `persist(seq, message)`, awaiting it before the next step: the
kernel acknowledges only once the message is on disk, so a crash can never
lose a message a later step depended on, and a resumed thread never repeats
one. User code failing ends the thread `failed` with a reason that names what
went wrong and where; nothing else is affected.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.automaton.model import (
    ASKS_PERSON,
    END,
    START,
    AskPerson,
    RoleResult,
    RoleSetupError,
    WorkflowDefinition,
    WorkflowMessage,
    is_round,
    pending_question,
    rounds_used,
)
from nerve_cli.clock import now_ms
from nerve_cli.vocab.states import ThreadStatus
from nerve_cli.wire.protocol import MAX_PAYLOAD
from nerve_cli.wire.protocol import ErrorInfo as Failure  # where user code went wrong: one type everywhere

COMPLETED, FAILED, WAITING = ThreadStatus.COMPLETED, ThreadStatus.FAILED, ThreadStatus.WAITING
REASON_END, REASON_MAX_ROUNDS = "end", "max_rounds"

Persist = Callable[[int, WorkflowMessage], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    status: str  # completed | failed | waiting
    reason: str  # "end", "max_rounds", what failed, or (waiting) the question for a person
    messages: tuple[WorkflowMessage, ...]
    error: Failure | None = None


@dataclass
class ThreadContext:
    """How to describe user code's failures: paths are shown relative to `root`."""

    source: Path | None = None  # the workflow file: its frames are preferred in reasons
    root: Path | None = None
    clock: Callable[[], int] = now_ms
    role_timeout: float | None = None  # an async role taking longer is cancelled (a sync one cannot be)
    role_retries: int = 0  # extra attempts when a role raises or times out
    role_backoff: float = 1.0  # the first pause before a retry; each next one doubles (with jitter)
    rng: random.Random = field(default_factory=random.Random)
    # told of each failed attempt that will be retried: (role, attempt, attempts, reason, failure, retry in s)
    on_retry: Callable[[str, int, int, str, "Failure | None", float], None] | None = None


BACKOFF_CAP = 60.0


def retry_delay(first: float, attempt: int, rng: random.Random) -> float:
    """The pause after failed attempt `attempt` (1-based): exponential back-off with "equal jitter".

    The nominal delay doubles each time (first, 2×first, 4×first … up to
    BACKOFF_CAP); half of it is fixed and half random, so retries of many
    threads against one rate-limited API spread out while each thread's
    pauses still grow: delay n lies in [d/2, d], delay n+1 in [d, 2d].
    """
    nominal = min(BACKOFF_CAP, first * 2 ** (attempt - 1))
    return nominal / 2 + rng.random() * nominal / 2


def describe(exc: BaseException, ctx: ThreadContext) -> Failure:
    """The exception as a Failure, located at the deepest frame inside the workflow file."""
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename:
        frames.append(traceback.FrameSummary(exc.filename, exc.lineno or 0, "<module>"))
    chosen = None
    for frame in frames:
        if ctx.source is None or Path(frame.filename) == ctx.source:
            chosen = frame
    if chosen is None and frames:
        chosen = frames[-1]
    file = _display(Path(chosen.filename), ctx.root) if chosen else None
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = str(exc) if not isinstance(exc, SyntaxError) else (exc.msg or str(exc))
    return Failure(type(exc).__name__, message, text, file, chosen.lineno if chosen else None)


def _display(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            pass
    return str(path)


def _summary(what: str, failure: Failure) -> str:
    at = f" at {failure.file}:{failure.line}" if failure.file else ""
    return f"{what} raised {failure.type}: {failure.message}{at}"


def _name(value: Any) -> str:
    return type(value).__name__


def check_choice(choice: Any, roles: Mapping[str, Any]) -> str | None:
    """None if the moderator's answer is usable, else why not."""
    if inspect.isawaitable(choice):
        if inspect.iscoroutine(choice):
            choice.close()  # never awaited: avoid the "never awaited" warning
        return "moderator returned an awaitable; it must be a plain (non-async) function returning a role name or END"
    if not isinstance(choice, str):
        return f"moderator returned {_name(choice)} {choice!r:.80}, expected a role name or END"
    if choice != END and choice not in roles:
        return f"moderator chose unknown role {choice!r} (roles: {', '.join(sorted(roles))})"
    return None


def to_message(role: str, result: Any, timestamp: int) -> WorkflowMessage | str:
    """The role's result as the next link of the chain, or why it cannot be one."""
    if not isinstance(result, RoleResult):
        return f"role {role!r} returned {_name(result)}, expected RoleResult(content, meta)"
    if not isinstance(result.content, str):
        return f"role {role!r} returned content of type {_name(result.content)}, expected str"
    if not isinstance(result.meta, Mapping):
        return f"role {role!r} returned meta of type {_name(result.meta)}, expected a mapping (e.g. a dict)"
    try:
        # round-tripped so the live chain equals the chain a resumed thread reads back
        meta = orjson.loads(orjson.dumps(dict(result.meta)))
    except (TypeError, orjson.JSONEncodeError) as exc:
        return f"role {role!r} returned meta that is not JSON-serialisable: {exc}"
    size = len(orjson.dumps({"content": result.content, "meta": meta}))
    if size > MAX_PAYLOAD:  # its line to the kernel would be over the limit: refused here, whole
        return (f"role {role!r} returned {size / 2**20:.1f} MiB of content and meta ({size:,} bytes); a round "
                f"carries at most {MAX_PAYLOAD:,} bytes ({MAX_PAYLOAD / 2**20:.1f} MiB). Keep large data in a file "
                "or a sense's table and put its path or a summary in the message")
    if isinstance(result, AskPerson):
        meta[ASKS_PERSON] = True
    return WorkflowMessage(role, result.content, meta, timestamp)


def max_rounds_of(messages: Sequence[WorkflowMessage], default: int | None = None) -> int:
    value = messages[0].meta.get("maxRounds", default) if messages else default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"the start message's meta.maxRounds must be a whole number >= 1, got {value!r}")
    return value


async def run_thread(
    definition: WorkflowDefinition[Any],
    messages: Sequence[WorkflowMessage],
    persist: Persist,
    ctx: ThreadContext | None = None,
) -> Outcome:
    """Run (or resume) a thread from its chain until END, maxRounds, or a failure.

    The moderator is consulted first at every step, so a thread whose last
    round satisfied it ends with reason `end` even when that round was the last
    one allowed. Rounds are numbered from 1; the start message is not a round.
    A role returning `ask_person(question)` ends this call as WAITING (reason:
    the question) once its message is persisted; the thread is run again from
    its chain with the person's answer appended. A chain that still waits for
    its answer returns WAITING at once.
    Cancellation (asyncio.CancelledError) propagates to the caller.
    """
    ctx = ctx or ThreadContext()
    chain = list(messages)
    if not chain or chain[0].role != START:
        return Outcome(FAILED, "the chain does not begin with a start message", tuple(chain))
    limit = max_rounds_of(chain)
    rounds = rounds_used(chain)  # counted once, then kept: a step costs the same at round 2,000 as at round 2
    question = pending_question(chain)
    if question is not None:
        return Outcome(WAITING, question, tuple(chain))
    while True:
        try:
            choice = definition.moderator(tuple(chain))
        except (Exception, SystemExit) as exc:
            described = describe(exc, ctx)
            return Outcome(FAILED, _summary("moderator", described), tuple(chain), described)
        problem = check_choice(choice, definition.roles)
        if problem:
            return Outcome(FAILED, problem, tuple(chain))
        if choice == END:
            return Outcome(COMPLETED, REASON_END, tuple(chain))
        if rounds >= limit:
            return Outcome(COMPLETED, REASON_MAX_ROUNDS, tuple(chain))
        result, reason, failure = await call_role(definition.roles[choice], choice, tuple(chain), ctx)
        if reason is not None:
            return Outcome(FAILED, reason, tuple(chain), failure)
        message = to_message(choice, result, ctx.clock())
        if isinstance(message, str):
            return Outcome(FAILED, message, tuple(chain))
        await persist(len(chain), message)
        chain.append(message)
        rounds += is_round(message.role)
        if isinstance(result, AskPerson):
            return Outcome(WAITING, message.content, tuple(chain))


async def call_role(
    role: Callable[..., Any], name: str, chain: tuple[WorkflowMessage, ...], ctx: ThreadContext
) -> tuple[Any, str | None, Failure | None]:
    """(result, None, None), or (None, why, failure) once every attempt raised or timed out.

    Attempts are spaced by `retry_delay` (exponential back-off with jitter), so
    retries against a rate-limited API do not all land at once. RoleSetupError
    (unknown model, missing key) is not retried: waiting would not fix it.
    """
    attempts = 1 + max(0, ctx.role_retries)
    for attempt in range(1, attempts + 1):
        failure: Failure | None = None
        try:
            async with asyncio.timeout(ctx.role_timeout) as deadline:
                result = role(chain)
                if inspect.isawaitable(result):
                    result = await result
            return result, None, None
        except TimeoutError as exc:
            if not deadline.expired():  # the role's own TimeoutError, not our deadline
                failure = describe(exc, ctx)
                reason = _summary(f"role {name!r}", failure)
            else:
                reason = f"role {name!r} timed out after {ctx.role_timeout:g}s (role_timeout)"
        except RoleSetupError as exc:
            failure = describe(exc, ctx)
            return None, f"role {name!r} cannot run: {exc}", failure
        except (Exception, SystemExit) as exc:
            failure = describe(exc, ctx)
            reason = _summary(f"role {name!r}", failure)
        if attempt == attempts:
            return None, reason + (f" ({attempts} attempts)" if attempts > 1 else ""), failure
        delay = retry_delay(ctx.role_backoff, attempt, ctx.rng)
        if ctx.on_retry is not None:  # a failure that is retried leaves a trace (the log, thread show)
            ctx.on_retry(name, attempt, attempts, reason, failure, delay)
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")
