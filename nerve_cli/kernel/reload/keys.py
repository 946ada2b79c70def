"""Every key of nerve.yaml, and when a change to it takes effect in a running engine.

A save of nerve.yaml is compared whole (`changes`): every field of the
validated configuration that differs is named, by its path
(`channels.gh.push.secret_env`, `reflexes[0].interval`), and each path is
either applied at once by the part that owns it (`LIVE`) or, for the few
that only an engine's start can apply (an address to listen on, the tracing
exporter), logged and said as taking effect at the next start (`NEXT_START`).
Nothing is compared by hand key by key, so no key can be silently ignored: a
field the registry below does not know fails `tests/test_reload_keys.py`,
which walks every field of the config model.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel

from nerve_cli.config.model import format_duration
from nerve_cli.durations import parse_duration


class Effect(str, Enum):
    LIVE = "live"  # applied by hot reload, by the part that owns it
    NEXT_START = "next start"  # logged and documented as taking effect at the engine's next start


# `*` stands for a name (a sense, a channel...) or an index (`reflexes[*]`)
NEXT_START = {
    "engine.metrics",  # the address the metrics endpoint listens on
    "engine.webhooks",  # the address the webhook server listens on
    "engine.webhook_connections", "engine.webhook_timeout",  # the webhook server's connection bounds
    "engine.ui",  # the address the web console the engine runs listens on
    "engine.otel", "engine.otel.endpoint", "engine.otel.capture_content", "engine.otel.enabled",  # the exporter
    "engine.preload",  # what the warm template imported when it started (workers keep forking from it)
}
LIVE = {
    # an entry that comes or goes: a sense, group, workflow, channel or agent; a reflex more or fewer
    "senses.*", "groups.*", "workflows.*", "channels.*", "agents.*", "reflexes", "fleet",
    "engine.max_rounds", "engine.archive_after", "engine.shutdown_timeout", "engine.health_interval",
    "engine.failure_backoff_after", "engine.failure_backoff_first", "engine.failure_backoff_max",
    "engine.quarantine_after", "engine.quarantine_window", "engine.quarantine_for",
    "engine.respawn_backoff_first", "engine.respawn_backoff_max",
    "groups.*.memory_limit", "groups.*.cpu_limit", "groups.*.cpu_window",
    "senses.*.group", "senses.*.throttle", "senses.*.timeout", "senses.*.grace_period", "senses.*.peers",
    "senses.*.enabled", "senses.*.expect_signal_every", "senses.*.signal_version", "senses.*.signal_hash",
    "senses.*.run_on_save",  # read at each save of the sense's files
    # the pump reads them at each start it queues, and each time a slot frees
    "senses.*.priority", "reflexes[*].priority", "groups.*.concurrency", "engine.priority_ageing",
    "workflows.*.priority", "workflows.*.concurrency_key", "workflows.*.key_overflow",
    "reflexes[*].sense", "reflexes[*].interval", "reflexes[*].on", "reflexes[*].paths", "reflexes[*].cron",
    "reflexes[*].timezone", "reflexes[*].debounce", "reflexes[*].max_wait", "reflexes[*].jitter",
    "reflexes[*].lazy", "reflexes[*].bindings", "reflexes[*].enabled",
    # a thread takes its workflow's settings when it is admitted: running threads keep theirs
    "workflows.*.concurrency", "workflows.*.overflow", "workflows.*.max_queue", "workflows.*.idempotent",
    "workflows.*.drain_timeout", "workflows.*.role_timeout", "workflows.*.role_retries", "workflows.*.role_backoff",
    "workflows.*.thread_timeout", "workflows.*.approval_timeout", "workflows.*.cancel_grace", "workflows.*.model",
    "workflows.*.system", "workflows.*.enabled", "workflows.*.approvers", "workflows.*.approvers.names",
    "workflows.*.approvers.count",
    "workflows.*.self_approval",
    # the fleet's link starts again with the new section
    "fleet.servers", "fleet.host", "fleet.stream", "fleet.publish.senses", "fleet.publish.channels",
    "fleet.subscribe.senses", "fleet.subscribe.channels", "fleet.retention", "fleet.max_bytes",
    "fleet.max_messages", "fleet.replicas", "fleet.ack_wait", "fleet.enabled",
    # the webhook server reads them at every post
    "channels.*.webhook", "channels.*.secret_env", "channels.*.signature_header", "channels.*.delivery_header",
    "channels.*.key", "channels.*.keep_headers",
    "agents.*.on", "agents.*.match", "agents.*.batch", "agents.*.deliver", "agents.*.deliver.codex",
    "agents.*.deliver.codex.endpoint",
    "agents.*.deliver.codex.thread", "agents.*.start", "agents.*.enabled",
    # causal depth: the guard reads its bounds at every directive and emit; config check reads `loops`
    "engine.max_causal_depth", "reflexes[*].max_depth", "loops",
    # the notifier reads its rules at every look (woken by each reload)
    "notify", "notify[*].name", "notify[*].on", "notify[*].senses", "notify[*].workflows", "notify[*].to",
    "notify[*].to_env", "notify[*].answer_as", "notify[*].retry_max", "notify[*].enabled",
}
KEYS: dict[str, Effect] = {**{k: Effect.LIVE for k in LIVE}, **{k: Effect.NEXT_START for k in NEXT_START}}
_MOST_SPECIFIC_FIRST = sorted(KEYS, key=lambda k: (-len(k.replace("*", "")), k))


@dataclass(frozen=True)
class Change:
    path: str  # `senses.cpu.throttle`, `channels.gh.push.webhook`, `reflexes[0].on`, `senses.new` (an entry)
    old: Any
    new: Any
    duration: bool = False  # a Duration field: shown as written in nerve.yaml (`5s`), not in seconds

    @property
    def effect(self) -> Effect:
        return effect_of(self.path)

    def describe(self) -> str:
        show = _duration if self.duration else _short
        return f"{self.path}: {show(self.old)} → {show(self.new)}"


def changes(old: BaseModel, new: BaseModel) -> list[Change]:
    """Every leaf of the configuration that differs, in the model's order; an entry of a named section (a
    sense, a channel...) or a reflex that came or went is one change of the whole entry."""
    return list(_walk(old, new, ""))


def _walk(old: Any, new: Any, path: str) -> typing.Iterator[Change]:
    if old == new:
        return
    if isinstance(old, BaseModel) and isinstance(new, BaseModel) and type(old) is type(new):
        for name, field in type(old).model_fields.items():
            found = _walk(getattr(old, name), getattr(new, name), f"{path}.{name}" if path else name)
            if _is_duration(field.metadata, field.annotation):
                found = (Change(c.path, c.old, c.new, duration=True) for c in found)
            yield from found
    elif isinstance(old, dict) and isinstance(new, dict) and _of_models(old, new):
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in new or key not in old:
                yield Change(f"{path}.{key}", old.get(key), new.get(key))
            else:
                yield from _walk(old[key], new[key], f"{path}.{key}")
    elif isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new) and _of_models(old, new):
        for i, (a, b) in enumerate(zip(old, new)):
            yield from _walk(a, b, f"{path}[{i}]")
    else:
        yield Change(path, old, new)


def _is_duration(metadata: list[Any], annotation: Any) -> bool:
    """A Duration field (`Duration` or `Duration | None`): its value was parsed from `5s`."""
    found = list(metadata)
    for arg in typing.get_args(annotation):
        found += list(getattr(arg, "__metadata__", ()))
    return any(getattr(m, "func", None) is parse_duration for m in found)


def _of_models(old: Any, new: Any) -> bool:
    values = [*(old.values() if isinstance(old, dict) else old), *(new.values() if isinstance(new, dict) else new)]
    return bool(values) and all(isinstance(v, BaseModel) for v in values)


def pattern_of(path: str) -> str:
    """`senses.cpu.throttle` → `senses.*.throttle`; `reflexes[3].on` → `reflexes[*].on`. A name may hold dots
    (`channels.gh.push.webhook`): the pattern whose fixed parts match is the one."""
    path = re.sub(r"\[\d+\]", "[*]", path)
    for pattern in _MOST_SPECIFIC_FIRST:  # `workflows.*.concurrency` before the entry `workflows.*`
        if _matches(pattern, path):
            return pattern
    return path


def effect_of(path: str) -> Effect:
    """When a change to `path` takes effect (a key no entry of KEYS names: never claimed to be applied)."""
    return KEYS.get(pattern_of(path), Effect.NEXT_START)


def _matches(pattern: str, path: str) -> bool:
    head, star, tail = pattern.partition("*")
    if not star:
        return pattern == path
    if not path.startswith(head) or not path.endswith(tail) or len(path) <= len(head) + len(tail):
        return False
    name = path[len(head):len(path) - len(tail)]
    return bool(name) and "*" not in tail


def leaf_patterns(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every path a change can have in a config model, as patterns: each leaf field (`senses.*.throttle`), each
    entry of a named section (`senses.*`), a tuple of entries as a whole (`reflexes`: one more or fewer), a
    field that may be a model or not (`fleet`: none, then one). What KEYS must classify."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        annotation = field.annotation
        origin, inner = typing.get_origin(annotation), _model_in(annotation)
        if inner is None:
            out.append(path)
        elif origin is dict:
            out += [f"{path}.*", *leaf_patterns(inner, f"{path}.*")]
        elif origin is tuple:
            out += [path, *leaf_patterns(inner, f"{path}[*]")]
        else:
            if annotation is not inner:  # `Model | None`, or a model among other types: it changes whole too
                out.append(path)
            out += leaf_patterns(inner, path)
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for arg in (typing.get_args(annotation) or (annotation,)):
        for inner in (typing.get_args(arg) or (arg,)):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _duration(value: Any) -> str:
    return "unset" if value is None else format_duration(value) if isinstance(value, (int, float)) else _short(value)


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, BaseModel):
        text = "{...}"
    elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        text = "[" + ", ".join(str(v) for v in value) + "]"
    elif value is None:
        text = "unset"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
