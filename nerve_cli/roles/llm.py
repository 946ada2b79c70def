"""Model-backed roles on Simon Willison's `llm`: every provider through its plugins, the user's own keys.

    from nerve_cli.sdk import llm_role
    critic = llm_role(system="You are a demanding critic ...")      # model: nerve.yaml, else llm's default

A role built here turns the chain into a prompt (default: the conversation
so far, as a transcript), calls the model and returns its text with meta
`{"model", "usage": {"input", "output"[, "details"]}, "duration_ms",
"conversation_id"}`. Where the model supports conversations the role keeps
one per thread: its next turn sends only what was said since its last one,
and the model sees its own earlier turns as history (after a worker restart
the conversation starts again from the whole transcript).

Which model: `llm_role(model=...)`, else `workflows.<name>.model` in
nerve.yaml, else llm's default model (`llm models default`). The system
prompt likewise (`system=`, else `workflows.<name>.system`). An unknown
model or a missing key raises RoleSetupError (the thread fails at once,
naming the fix); anything else the model raises is an ordinary role failure,
retried per `role_retries` with back-off. `role_timeout` cancels an async
model call; a sync one runs in a daemon thread of its own and is abandoned
there (it ends with the worker, never holding up its exit).

When the user's llm logging is on (`llm logs on`, llm's default), each call is
also recorded in llm's own logs.db, as `llm prompt` records it, so `llm logs`
shows Nerve's calls; an unknown model or a missing key names the llm folder
this worker uses (its environment is the engine's, not the caller's shell's).

`llm` is imported when a workflow worker starts with such a role (`warm_up`,
so the import does not count against the first call's role_timeout) or on the
first call, never when this module or a workflow file is merely imported:
only workflow workers running such a role pay for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from nerve_cli.automaton.context import current_thread
from nerve_cli.automaton.model import PERSON, START, RoleResult, RoleSetupError, WorkflowMessage
from nerve_cli.roles.llm_env import llm_env

PromptBuilder = Callable[[Sequence[WorkflowMessage]], "str | Awaitable[str]"]
CONVERSATION_KEY = "conversation_id"
T = TypeVar("T")


def transcript(messages: Sequence[WorkflowMessage]) -> str:
    """The chain as plain text a model reads well: one `[speaker]` heading per message, content below."""
    parts = []
    for m in messages:
        if m.role == START:
            head = "[prompt]"
        elif m.role == PERSON:
            head = f"[person: {m.meta.get('decision', 'answer')}]"
        else:
            head = f"[{m.role}]"
        parts.append(f"{head}\n{m.content}")
    return "\n\n".join(parts)


class LlmRole:
    """An async role calling an `llm` model; see the module docstring. Build it with `llm_role()`."""

    def __init__(self, model: str | None, system: str | None, prompt: PromptBuilder | None,
                 options: Mapping[str, Any] | None, conversation: bool, sync: bool | None) -> None:
        self.model = model
        self.system = system
        self.prompt = prompt or transcript
        self.options = dict(options or {})
        self.conversation = conversation
        self.sync = sync

    async def __call__(self, messages: Sequence[WorkflowMessage]) -> RoleResult[dict[str, Any]]:
        info = current_thread()
        model = resolve_model(self.model or (info.model if info else None), self.sync)
        system = self.system if self.system is not None else (info.system if info else None)
        state = info.state if info is not None else {}
        conv = self._conversation(model, state, messages)
        seen = _since(messages, conv) if conv is not None else messages
        text = self.prompt(seen)
        if inspect.isawaitable(text):
            text = await text
        if not isinstance(text, str):
            raise TypeError(f"the prompt builder returned {type(text).__name__}, expected str")
        started = time.perf_counter()
        target = conv if conv is not None else model
        if _is_async(model):
            response = target.prompt(text, system=system, **self.options)
            content = await response.text()
            usage = await response.usage()
        else:  # a sync model blocks: run it in a thread (a role_timeout abandons it there)
            response = target.prompt(text, system=system, **self.options)
            content = await in_daemon_thread(response.text)
            usage = response.usage()
        meta: dict[str, Any] = {"model": model.model_id, "usage": _usage(usage),
                                "duration_ms": round((time.perf_counter() - started) * 1000, 1)}
        await in_daemon_thread(partial(log_to_llm, response))
        if conv is not None:
            meta[CONVERSATION_KEY] = conv.id
        return RoleResult(content, meta)

    def warm_up(self) -> None:
        """Import llm and load its plugins' models now (≈ 0.4 s), at worker start rather than inside the
        first call's role_timeout. Problems are left for the call to report."""
        try:
            import llm  # ≈ 0.4 s: paid by a worker starting such a role, never by importing this module

            llm.get_models_with_aliases()
        except Exception:  # the call itself names what is wrong
            pass

    def _conversation(self, model: Any, state: dict, messages: Sequence[WorkflowMessage]) -> Any:
        """This role's conversation in this thread, or None (turned off, or the model has none)."""
        if not self.conversation or not getattr(model, "supports_conversation", False):
            return None
        key = ("llm_role", id(self), model.model_id)
        conv = state.get(key)
        if conv is None:
            conv = state[key] = model.conversation()
        return conv


def _since(messages: Sequence[WorkflowMessage], conv: Any) -> Sequence[WorkflowMessage]:
    """The messages after this conversation's last turn (all of them before its first)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].meta.get(CONVERSATION_KEY) == conv.id:
            return messages[index + 1:]
    return messages


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """`await asyncio.to_thread(call)`, but in a daemon thread of its own, not the loop's executor.

    A model call that never returns (a provider gone silent) cannot be stopped once its thread runs:
    role_timeout abandons it. In the default executor it would hold up the worker's exit (asyncio.run
    and the interpreter both wait for executor threads), and stay counted in the executor's few slots.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # cancelled by role_timeout meanwhile: nobody waits for it
            outcome()

    def run() -> None:
        try:
            result = context.run(call)
        except BaseException as exc:  # handed to the awaiting role, as to_thread would
            answer = partial(settle, partial(done.set_exception, exc))
        else:
            answer = partial(settle, partial(done.set_result, result))
        try:
            loop.call_soon_threadsafe(answer)
        except RuntimeError:  # the loop is closed: the worker is ending and nobody waits
            pass

    threading.Thread(target=run, name="llm-call", daemon=True).start()
    return await done


def log_to_llm(response: Any) -> None:
    """Record the call in llm's own logs.db, as `llm prompt` does, when the user's llm logging is on (`llm logs
    on`, its default): `llm logs` then shows Nerve's model calls beside the user's own. A failure to log is
    reported on stderr (the engine's output) and never fails the role."""
    import llm  # loaded already by resolve_model

    folder = llm.user_dir()
    if (folder / "logs-off").exists():
        return
    try:
        import sqlite_utils  # with llm's CLI and migrations: only a worker logging a model call pays for them
        from llm.cli import logs_db_path  # (as above)
        from llm.migrations import migrate  # (as above)

        db = sqlite_utils.Database(logs_db_path())
        try:
            migrate(db)
            response.log_to_db(db)
        finally:
            db.close()
    except Exception as exc:  # the answer is what matters; the log is a copy
        print(f"nerve: could not log the model call in llm's folder {folder}: {type(exc).__name__}: {exc}",
              file=sys.stderr)


def _usage(usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"input": usage.input, "output": usage.output}
    if usage.details:
        out["details"] = usage.details
    return out


def _is_async(model: Any) -> bool:
    import llm  # loaded already by resolve_model; kept off the module's top for the same reason

    return isinstance(model, (llm.AsyncModel, llm.AsyncKeyModel))


_models: dict[tuple[str, bool | None], Any] = {}


def resolve_model(model_id: str | None, sync: bool | None = None) -> Any:
    """The llm model for `model_id` (None: llm's default), async unless `sync` or only a sync one exists.

    RoleSetupError with the fix for an unknown model or a missing key. Cached per process by the
    resolved name, so a change of llm's default model applies to the next call.
    """
    import llm  # ≈ 0.4 s with its plugins: only a worker whose role calls a model pays it

    name = model_id or llm.get_default_model()
    cached = _models.get((name, sync))
    if cached is not None:
        return cached
    model: Any = None
    if not sync:
        try:
            model = llm.get_async_model(name)
        except llm.UnknownModelError:
            pass
    if model is None and sync is not False:
        try:
            model = llm.get_model(name, _skip_async=True)
        except llm.UnknownModelError:
            pass
    if model is None:
        raise RoleSetupError(f"{unknown_model(name, model_id is None)} (roles here use {llm_env().describe()})")
    if getattr(model, "needs_key", None):
        try:
            model.get_key()
        except llm.NeedsKeyException as exc:
            raise RoleSetupError(f"model {model.model_id} needs an API key: {exc} (roles here use "
                                 f"{llm_env().describe()}: set the key there, `llm keys set`, or give the engine "
                                 "the key's variable, `nerve service install --env NAME` for a service)") from None
    _models[(name, sync)] = model
    return model


def unknown_model(name: str, is_default: bool) -> str:
    where = ("llm's default model (set it with `llm models default MODEL`, or set workflows.<name>.model "
             "in nerve.yaml)" if is_default else "set in llm_role(model=...) or workflows.<name>.model")
    return (f"unknown model {name!r}, {where}: install the plugin that provides it with `llm install PLUGIN` "
            f"(e.g. `llm install llm-anthropic`, `llm install llm-ollama`), or choose one listed by `llm models`")


def llm_role(model: str | None = None, system: str | None = None, prompt: PromptBuilder | None = None, *,
             options: Mapping[str, Any] | None = None, conversation: bool = True,
             sync: bool | None = None) -> Callable[[Sequence[WorkflowMessage]], Awaitable[RoleResult[dict[str, Any]]]]:
    """A role that asks a model.

    Args:
        model: llm model id or alias; default `workflows.<name>.model`, else llm's default model.
        system: system prompt; default `workflows.<name>.system`, else none.
        prompt: turns the messages into the prompt text (sync or async); default `transcript`.
            With a conversation it receives only the messages since this role's last turn.
        options: model options, e.g. {"temperature": 0.2} (see `llm models --options`).
        conversation: keep one model conversation per thread when the model supports it.
        sync: None uses the model's async form when it has one; True forces the sync form
            (run in a thread); False requires an async one.
    """
    return LlmRole(model, system, prompt, options, conversation, sync)
