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

from nerve_cli.automaton.context import current_thread
from nerve_cli.automaton.model import (
    END,
    START,
    AskPerson,
    RoleResult,
    RoleSetupError,
    WorkflowDefinition,
    WorkflowMessage,
    is_round,
    rounds_used,
)
from nerve_cli.automaton.questions import next_id
from nerve_cli.automaton.waits import Sleep, WaitForEvent, pending_wait, tool_continuation, wait_meta
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


def to_message(role: str, result: Any, timestamp: int, round_started: int | None = None,
               first_question: int = 1) -> WorkflowMessage | str:
    """The role's result as the next link of the chain, or why it cannot be one.

    A result that waits (a person, an event) gets the wait in its meta; an event wait counts the events
    committed from `round_started` (default: `timestamp`) on; a person's questions are numbered from
    `q{first_question}` (the thread's questions so far + 1).
    """
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
    if waits(result):
        wait_meta(result, meta, timestamp if round_started is None else round_started, first_question)
    return WorkflowMessage(role, result.content, meta, timestamp)


def waits(result: Any) -> bool:
    """True for a role's result that stops the thread until something answers it."""
    return isinstance(result, (AskPerson, WaitForEvent, Sleep))


def last_round_refusal(role: str, result: Any, rounds: int, limit: int) -> str | None:
    """Why a wait is refused when asked, else None.

    A wait asked at the last round allowed gets the round it needs: once it is
    answered, the moderator's choice runs as one extra round (`rounds_allowed`).
    That extra round cannot wait again (nothing would be left to act on a
    second answer): a wait asked there is refused.
    """
    if rounds + 1 <= limit:
        return None
    what = ("asked a person" if isinstance(result, AskPerson) else "slept" if isinstance(result, Sleep)
            else "waited for an event")
    return (f"role {role!r} {what} in round {rounds + 1}, the extra round that acts on the answer to a wait "
            f"asked at the last round (maxRounds {limit}); it cannot wait again. Give the thread more rounds, "
            "or ask earlier")


def rounds_allowed(messages: Sequence[WorkflowMessage], limit: int) -> int:
    """`limit`, or one more when the last round was a wait asked at the last round and it has been answered."""
    rounds = 0
    last_wait_round = None
    for index, message in enumerate(messages):
        if is_round(message.role):
            rounds += 1
            answered = index < len(messages) - 1
            last_wait_round = rounds if answered and pending_wait(messages[index:index + 1]) is not None else None
    return limit + 1 if last_wait_round == limit else limit


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
    A role returning `ask_person(question)` or `wait_for_event(...)` ends this
    call as WAITING (reason: what it waits for) once its message is persisted;
    the thread is run again from its chain with the answer (a person's, an
    event) appended. A chain that still waits returns WAITING at once. A wait
    asked at the last round allowed gets one extra round to act on its answer;
    a wait asked in that extra round is refused: the thread fails saying so.
    Cancellation (asyncio.CancelledError) propagates to the caller.
    """
    ctx = ctx or ThreadContext()
    chain = list(messages)
    if not chain or chain[0].role != START:
        return Outcome(FAILED, "the chain does not begin with a start message", tuple(chain))
    limit = max_rounds_of(chain)
    rounds = rounds_used(chain)  # counted once, then kept: a step costs the same at round 2,000 as at round 2
    allowed = rounds_allowed(chain, limit)  # one more when the chain's last wait, asked at the last round, was answered
    wait = pending_wait(chain)
    if wait is not None:
        return Outcome(WAITING, wait.describe(), tuple(chain))
    while True:
        resumed = tool_continuation(chain, ctx.clock)
        if resumed is not None:  # a person answered a role's tool call: that role goes on, the moderator waits
            choice, note = resumed
            if choice not in definition.roles:
                return Outcome(FAILED, f"role {choice!r} asked about a tool call and is no longer a role "
                                       f"(roles: {', '.join(sorted(definition.roles))})", tuple(chain))
            await persist(len(chain), note)
            chain.append(note)
        else:
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
            if rounds >= allowed:
                return Outcome(COMPLETED, REASON_MAX_ROUNDS, tuple(chain))
        info = current_thread()
        if info is not None:  # a role helper that would wait (a tool call's approval) asks this
            info.can_wait = rounds + 1 <= limit
        began = ctx.clock()
        result, reason, failure = await call_role(definition.roles[choice], choice, tuple(chain), ctx)
        if reason is not None:
            return Outcome(FAILED, reason, tuple(chain), failure)
        refused = last_round_refusal(choice, result, rounds, limit) if waits(result) else None
        if refused is not None:
            return Outcome(FAILED, refused, tuple(chain))
        message = to_message(choice, result, ctx.clock(), began, next_id(chain) if waits(result) else 1)
        if isinstance(message, str):
            return Outcome(FAILED, message, tuple(chain))
        await persist(len(chain), message)
        chain.append(message)
        rounds += is_round(message.role)
        wait = pending_wait(chain)
        if wait is not None:
            return Outcome(WAITING, wait.describe(), tuple(chain))


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
            return None, f"role {name!r} {exc.lead}: {exc}", failure
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
