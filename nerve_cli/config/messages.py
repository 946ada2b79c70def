"""pydantic error dicts → messages a person can act on ("expected X, got Y", "did you mean")."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from nerve_cli.config.model import NerveConfig
from nerve_cli.config.rules import nearest

_KIND = {"engine": "engine setting", "groups": "group setting", "senses": "sense setting",
         "reflexes": "reflex key", "workflows": "workflow setting", "fleet": "fleet setting",
         "channels": "channel setting"}
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n", "true", "false", "True", "False", "TRUE", "FALSE"}


def show(value: Any) -> str:
    """A short rendering of the offending value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(tp: Any) -> Any:
    """Annotated[X, ...] → X; X | None → X."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        return _unwrap(rest[0]) if len(rest) == 1 else tp
    return tp


def _step(tp: Any, part: Any) -> Any:
    """The type found one step down `tp` at key/index `part`, or None."""
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part)
        return field.annotation if field else None
    if get_origin(tp) is dict:
        return get_args(tp)[1]
    if get_origin(tp) in (tuple, list):
        return get_args(tp)[0]
    return None


def _as_model(tp: Any) -> type[BaseModel] | None:
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model whose keys live at `loc[:-1]`, found by walking NerveConfig's annotations."""
    tp: Any = NerveConfig
    for part in loc[:-1]:
        tp = _step(tp, part)
        if tp is None:
            return None
    return _as_model(tp)


def section_models() -> dict[str, type[BaseModel]]:
    """Top-level section → the model of one entry in it (engine → EngineConfig, senses → SenseConfig, ...)."""
    out = {}
    for name, field in NerveConfig.model_fields.items():
        model = _as_model(field.annotation) or _as_model(_step(field.annotation, "*"))
        if model is not None:
            out[name] = model
    return out


def unknown_key(loc: tuple) -> str:
    key = str(loc[-1])
    owner = model_at(loc)
    valid = list(owner.model_fields) if owner else []
    close = nearest(key, valid)
    if close:
        return f"unknown key `{key}`; did you mean `{close}`?"
    elsewhere = [s for s, m in section_models().items() if key in m.model_fields and s != loc[0]]
    if elsewhere and owner is not NerveConfig:
        kind = _KIND.get(elsewhere[0], f"`{elsewhere[0]}` key")
        return f"unknown key `{key}` here: `{key}` is a {kind} (under `{elsewhere[0]}:`)"
    return f"unknown key `{key}`; valid keys here: {', '.join(valid)}"


def message_for(error: Mapping[str, Any]) -> str:
    """One pydantic error (from `ValidationError.errors()`) → our wording."""
    kind, value, loc = error["type"], error.get("input"), error["loc"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return unknown_key(loc)
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "missing":
        what = " (the sense this reflex schedules)" if loc[-1] == "sense" else ""
        return f"missing required key `{loc[-1]}`{what}"
    if kind == "bool_type":
        note = " (YAML 1.2 reads yes/no/on/off as text)" if isinstance(value, str) and value in _YAML11_BOOLS else ""
        return f"expected true or false, got {show(value)}{note}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {show(value)}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return f"expected a number {'≥' if 'ge' in ctx else '>'} {bound}, got {show(value)}"
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return f"expected a number {'≤' if 'le' in ctx else '<'} {bound}, got {show(value)}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {show(value)}"
    if kind in ("tuple_type", "list_type"):
        if loc == ("reflexes",):
            return f"expected a list of reflexes like `- {{sense: cpu-usage, interval: 10s}}`, got {show(value)}"
        return f"expected a list like [a, b], got {show(value)}"
    if kind == "too_short" and loc[-1] == "servers":
        return "expected at least one server URL, like [nats://nats.example.com:4222]"
    if kind == "string_type":
        return f"expected a string, got {show(value)}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return _mapping_expected(loc, value)
    return f"{error['msg']}, got {show(value)}"


def _mapping_expected(loc: tuple, value: Any) -> str:
    examples = {
        "senses": "{group: system, throttle: 5s}",
        "reflexes": "{sense: cpu-usage, interval: 10s}",
        "workflows": "{concurrency: 1, overflow: queue}",
        "engine": "{max_rounds: 100}",
        "groups": "{memory_limit: 300MB}",
        "fleet": "{servers: [nats://nats.example.com:4222], publish: {senses: [disk-usage]}}",
    }
    example = examples.get(loc[0], "")
    if len(loc) == 1:
        shape = {"senses": "a mapping of sense name → settings", "workflows": "a mapping of workflow name → settings",
                 "groups": "a mapping of group name → settings", "reflexes": "a list of reflexes",
                 "engine": "a mapping of settings", "fleet": "a mapping of settings"}.get(loc[0], "a mapping")
        return f"expected {shape}, got {show(value)}"
    return f"expected a mapping like {example}, got {show(value)}"
