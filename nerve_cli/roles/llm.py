"""Model-backed roles on Simon Willison's `llm`: every provider through its plugins, the user's own keys.

    from nerve_cli.sdk import llm_role
    critic = llm_role(system="You are a demanding critic ...")      # model: nerve.yaml, else llm's default

A role built here turns the chain into a prompt (default: the conversation
so far, as a transcript), calls the model and returns its text with meta
`{"model", "provider", "usage": {"input", "output"[, "details"]}, "duration_ms",
"conversation_id", "model_calls"}`; `model_calls` has one entry per call the
model answered in the turn (a turn with tools is several): `{"started_ms"
(epoch), "duration_ms", "usage", "finish_reason", "tool_call_ids"}`, what the
trace's spans are made from. Where the model supports conversations the role keeps
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

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from nerve_cli.automaton.context import current_thread
from nerve_cli.automaton.model import PERSON, START, RoleResult, RoleSetupError, WorkflowMessage, ask_person
from nerve_cli.automaton.questions import TOOL_APPROVAL, call_question
from nerve_cli.roles.blocking import in_daemon_thread
from nerve_cli.roles.llm_env import llm_env
from nerve_cli.roles.llm_log import LOG
from nerve_cli.roles.tools import TOOL_CALLS, ToolRound, approval_question, as_spec, resumption

PromptBuilder = Callable[[Sequence[WorkflowMessage]], "str | Awaitable[str]"]
CONVERSATION_KEY = "conversation_id"
MODEL_CALLS = "model_calls"
# the OpenTelemetry GenAI conventions' provider names, by the module of the llm plugin whose model answered
PROVIDERS = {"llm.default_plugins.openai_models": "openai", "llm_anthropic": "anthropic", "llm_claude_3": "anthropic",
             "llm_gemini": "gcp.gemini", "llm_vertex": "gcp.vertex_ai", "llm_mistral": "mistral_ai",
             "llm_groq": "groq", "llm_bedrock": "aws.bedrock", "llm_deepseek": "deepseek",
             "llm_perplexity": "perplexity", "llm_grok": "x_ai", "llm_cohere": "cohere", "llm_command_r": "cohere",
             "llm_ollama": "ollama"}
# a provider's own stop reasons, as the conventions name them
FINISH_REASONS = {"end_turn": "stop", "stop": "stop", "stop_sequence": "stop", "tool_use": "tool_call",
                  "tool_calls": "tool_call", "function_call": "tool_call", "max_tokens": "length", "length": "length",
                  "content_filter": "content_filter", "safety": "content_filter", "STOP": "stop",
                  "MAX_TOKENS": "length", "SAFETY": "content_filter"}


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
                 options: Mapping[str, Any] | None, conversation: bool, sync: bool | None,
                 tools: Sequence[Any] = (), max_tool_calls: int = 10) -> None:
        self.model = model
        self.system = system
        self.prompt = prompt or transcript
        self.options = dict(options or {})
        self.conversation = conversation
        self.sync = sync
        self.tools = [as_spec(t) for t in tools]
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"llm_role(tools=...): two tools share a name ({', '.join(sorted(names))}); "
                             "give one another with tool(fn, name=...)")
        if isinstance(max_tool_calls, bool) or not isinstance(max_tool_calls, int) or max_tool_calls < 1:
            raise ValueError(f"llm_role(max_tool_calls=...) must be a whole number >= 1, got {max_tool_calls!r}")
        self.max_tool_calls = max_tool_calls

    async def __call__(self, messages: Sequence[WorkflowMessage]) -> RoleResult[dict[str, Any]]:
        info = current_thread()
        model = resolve_model(self.model or (info.model if info else None), self.sync)
        system = self.system if self.system is not None else (info.system if info else None)
        state = info.state if info is not None else {}
        conv = self._conversation(model, state, messages)
        if self.tools:
            return await self._with_tools(model, system, conv, messages, info)
        seen = _since(messages, conv) if conv is not None else messages
        text = await self._prompt_text(seen)
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
        meta: dict[str, Any] = {"model": model.model_id, "provider": provider_of(model), "usage": _usage(usage),
                                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                                MODEL_CALLS: await _model_calls([response], is_async=_is_async(model))}
        LOG.submit(response)  # llm's logs.db, written by its own thread: the round does not wait for its fsyncs
        if conv is not None:
            meta[CONVERSATION_KEY] = conv.id
        return RoleResult(content, meta)

    async def _prompt_text(self, seen: Sequence[WorkflowMessage]) -> str:
        text = self.prompt(seen)
        if inspect.isawaitable(text):
            text = await text
        if not isinstance(text, str):
            raise TypeError(f"the prompt builder returned {type(text).__name__}, expected str")
        return text

    async def _with_tools(self, model: Any, system: str | None, conv: Any, messages: Sequence[WorkflowMessage],
                          info: Any) -> RoleResult[dict[str, Any]]:
        """A turn whose model may call tools (llm's chain runs the loop), or the rest of one a person answered."""
        import llm  # loaded already by resolve_model

        is_async = _is_async(model)
        back = resumption(messages)
        calls = ToolRound(self.tools, self.max_tool_calls, sync=not is_async,
                          can_wait=info.can_wait if info is not None else True,
                          decisions=back.decisions if back is not None else None)
        hooks = {"tools": calls.llm_tools(), "before_call": calls.before_call, "options": self.options}
        if back is not None:  # the history ends with the call the person answered: llm runs it first
            history = [llm.parts.Message.from_dict(m) for m in back.history]  # type: ignore[arg-type]
            chain = model.chain(messages=history, **hooks)
        else:
            seen = _since(messages, conv) if conv is not None else messages
            chain = (conv if conv is not None else model).chain(await self._prompt_text(seen), system=system, **hooks)
        started = time.perf_counter()
        earlier = back.calls if back is not None else []
        try:
            content = await chain.text() if is_async else await in_daemon_thread(chain.text)
        except llm.PauseChain as pause:  # calls need a person's approval: ask, with what it takes to go on
            return await _ask_about(chain, pause, calls, earlier, started, is_async)
        meta: dict[str, Any] = {"model": model.model_id, "provider": provider_of(model),
                                "usage": await _chain_usage(chain, is_async),
                                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                                TOOL_CALLS: calls.after(earlier),
                                MODEL_CALLS: await _model_calls(chain._responses, is_async)}
        LOG.submit(chain)  # every model call of the turn, in llm's logs.db (as above)
        if conv is not None and back is None:
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


async def _ask_about(chain: Any, pause: Any, calls: ToolRound, earlier: list[dict[str, Any]], started: float,
                     is_async: bool) -> RoleResult[dict[str, Any]]:
    """The questions a paused chain becomes: every call of the model's turn that needs a person's approval
    (one question each, answered in any order), and llm's history up to them (to go on from)."""
    import llm  # loaded already by resolve_model

    if chain._responses:  # the response whose tool calls were being run (llm keeps them in order)
        last = chain._responses[-1]
        said = await last.messages() if is_async else last.messages()
        history = [*last.prompt.messages, *said]
    else:  # paused while running the calls a resumed history ends with: that history is where it stands
        said, history = [], list(chain.prompt.messages)
    if pause.tool_results:  # the calls beside them that ran: their results are part of the history
        history.append(llm.parts.Message(role="tool", parts=[
            llm.parts.ToolResultPart(name=r.name, output=r.output, tool_call_id=r.tool_call_id)
            for r in pause.tool_results]))
    text = "".join(p.text for m in said for p in m.parts if isinstance(p, llm.parts.TextPart))
    asked = [{"name": c.name, "arguments": dict(c.arguments or {}), "tool_call_id": c.tool_call_id}
             for c in _unanswered(history) if calls.asks(c.tool_call_id, c.name, dict(c.arguments or {}))]
    meta = {TOOL_APPROVAL: {"calls": asked, "questions": [call_question(c) + _said(text) for c in asked],
                            "history": [m.to_dict() for m in history]},
            TOOL_CALLS: calls.after(earlier), "model": chain.model.model_id, "provider": provider_of(chain.model),
            "usage": await _chain_usage(chain, is_async),
            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            MODEL_CALLS: await _model_calls(chain._responses, is_async)}
    return ask_person(approval_question(asked, text), meta)


def _said(text: str) -> str:
    return f"\n\n{text.strip()}" if text.strip() else ""


def _unanswered(history: Sequence[Any]) -> list[Any]:
    """The tool calls of the history's last assistant message that no later tool message answers."""
    import llm  # loaded already by resolve_model

    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        calls = [p for p in message.parts if isinstance(p, llm.parts.ToolCallPart) and not p.server_executed]
        if message.role == "assistant" and calls:
            answered = {p.tool_call_id for m in history[index + 1:] for p in m.parts
                        if isinstance(p, llm.parts.ToolResultPart)}
            return [c for c in calls if c.tool_call_id not in answered]
    return []


async def _chain_usage(chain: Any, is_async: bool) -> dict[str, Any]:
    """The tokens of every model call the chain made (a turn with tools is several calls)."""
    total = {"input": 0, "output": 0}
    for response in chain._responses:
        usage = await response.usage() if is_async else response.usage()
        for key in total:
            value = getattr(usage, key, None)
            total[key] += value if isinstance(value, int) else 0
    return total


def provider_of(model: Any) -> str:
    """The GenAI conventions' `gen_ai.provider.name` for an llm model: a known plugin's provider, else the
    plugin's module without its `llm_` prefix (llm-echo: `echo`)."""
    module = type(model).__module__
    for prefix, provider in PROVIDERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return provider
    top = module.split(".")[0]
    return top.removeprefix("llm_") if top != "llm" else "llm"


async def _model_calls(responses: Sequence[Any], is_async: bool) -> list[dict[str, Any]]:
    """One record per model call of the turn (llm keeps each response's start and end): when it started, how
    long it took, its tokens, why it stopped and the tool calls it asked for."""
    out = []
    for response in responses:
        usage = await response.usage() if is_async else response.usage()
        asked = await response.tool_calls() if is_async else response.tool_calls()
        start, end, utc = (getattr(response, name, None) for name in ("_start", "_end", "_start_utcnow"))
        record: dict[str, Any] = {
            "started_ms": round(utc.timestamp() * 1000, 1) if utc is not None else None,
            "duration_ms": round((end - start) * 1000, 1) if start is not None and end is not None else None,
            "usage": _usage(usage) if usage is not None else None,
            "finish_reason": _finish_reason(response, bool(asked)),
            "tool_call_ids": [c.tool_call_id for c in asked]}
        out.append(record)
    return out


def _finish_reason(response: Any, asked_tools: bool) -> str:
    """The provider's stop reason in the conventions' words, when its response says; else what the call did."""
    raw = response.response_json if isinstance(getattr(response, "response_json", None), dict) else {}
    given = raw.get("stop_reason") or raw.get("finish_reason")
    choices = raw.get("choices")
    if given is None and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        given = choices[0].get("finish_reason")
    if isinstance(given, str) and given in FINISH_REASONS:
        return FINISH_REASONS[given]
    return "tool_call" if asked_tools else "stop"


def log_to_llm(response: Any) -> None:
    """Record the call in llm's own logs.db now, as `llm prompt` does, when the user's llm logging is on (`llm logs
    on`, its default). A failure to log is reported on stderr (the engine's output) and never fails the role.
    Roles hand their calls to `llm_log.LOG` and do not wait."""
    LOG.submit(response)
    LOG.flush()


def _usage(usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"input": getattr(usage, "input", None), "output": getattr(usage, "output", None)}
    if getattr(usage, "details", None):
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
             options: Mapping[str, Any] | None = None, conversation: bool = True, sync: bool | None = None,
             tools: Sequence[Any] = (),
             max_tool_calls: int = 10) -> Callable[[Sequence[WorkflowMessage]], Awaitable[RoleResult[dict[str, Any]]]]:
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
        tools: functions the model may call (type hints and a docstring describe them to it), ready-made
            ones from `nerve_tools`, or `tool(fn, approval=True)` for a call a person must allow first
            (see roles.tools). Each call is recorded in the message's meta under `tool_calls`.
        max_tool_calls: at most this many tool calls in one round; one more fails the thread.
    """
    return LlmRole(model, system, prompt, options, conversation, sync, tools, max_tool_calls)
