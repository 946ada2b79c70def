"""How a sense reads its `on:` sources: eagerly or when read, filtered by bindings, per parameter.

A reflex with `lazy: true` does not run its sense when its sources have
events: they wait in their own stores until something reads the sense
(`nerve sense show`, `nerve sense compute`, an MCP read, a peer's read), which
first brings it up to date. `bindings` keep, of each source's events, those
whose payload has the given values (`{repo: me/app}`; a list takes any of its
values); a value `$name` is a parameter, bound by each read (`--bind
repo=me/app`), and each set of values is a projection of its own, with its own
cursors and its own current value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import orjson

from nerve_cli.config.model import NerveConfig
from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.names import binding_param

# source → {payload key: wanted value or values}, every `$name` replaced by its bound value
Filters = dict[str, dict[str, Any]]


class BindError(NerveError):
    """A read that binds the wrong parameters, or a value that is not one: a usage error."""

    exit_code = 2
    type = ErrorType.USAGE


@dataclass(frozen=True)
class Reading:
    """How one sense reads its sources (from its enabled reflexes)."""

    sense: str
    eager: tuple[str, ...] = ()  # sources whose events run the sense at once
    lazy: tuple[str, ...] = ()  # sources whose events wait for a read
    bindings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # source → as written in nerve.yaml

    @property
    def is_lazy(self) -> bool:
        return bool(self.lazy)

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters every read must bind (sorted)."""
        return tuple(sorted({p for b in self.bindings.values() for v in b.values()
                             if (p := binding_param(v)) is not None}))

    def filters(self, bind: Mapping[str, Any] | None = None) -> Filters:
        """The bindings with `bind`'s values in place of the parameters; BindError when `bind` does not fit."""
        bind = dict(bind or {})
        missing = [p for p in self.params if p not in bind]
        extra = sorted(set(bind) - set(self.params))
        if missing or extra:
            raise BindError(self._bind_problem(missing, extra))
        for name, value in bind.items():
            if isinstance(value, (dict, list)) or value is None:
                raise BindError(f"sense `{self.sense}`: {name} is bound to {value!r}; a parameter's value is a "
                                "string, number or boolean")
        out: Filters = {}
        for source, wanted in self.bindings.items():
            out[source] = {key: bind[p] if (p := binding_param(v)) is not None else v for key, v in wanted.items()}
        return {s: f for s, f in out.items() if f}

    def _bind_problem(self, missing: list[str], extra: list[str]) -> str:
        if not self.params:
            return (f"sense `{self.sense}` takes no parameters, but the read binds {', '.join(extra)}; "
                    "read it without --bind")
        usage = " ".join(f"--bind {p}=VALUE" for p in self.params)
        said = []
        if missing:
            said.append(f"binds no {', '.join(missing)}")
        if extra:
            said.append(f"binds {', '.join(extra)}, which it does not take")
        return f"sense `{self.sense}` is read with {usage}; this read {' and '.join(said)}"


def reading(config: NerveConfig, sense: str) -> Reading:
    return readings(config).get(sense, Reading(sense))


def readings(config: NerveConfig) -> dict[str, Reading]:
    """How every sense with an `on:` source reads them (one pass over the reflexes)."""
    eager: dict[str, list[str]] = {}
    lazy: dict[str, list[str]] = {}
    bindings: dict[str, dict[str, Mapping[str, Any]]] = {}
    for reflex in config.active_reflexes():
        if not reflex.on:
            continue
        into = (lazy if reflex.lazy else eager).setdefault(reflex.sense, [])
        eager.setdefault(reflex.sense, [])
        for source in reflex.on:
            if source not in into:
                into.append(source)
            if reflex.bindings:
                bindings.setdefault(reflex.sense, {})[source] = dict(reflex.bindings)
    return {name: Reading(name, tuple(eager.get(name, ())), tuple(lazy.get(name, ())), bindings.get(name, {}))
            for name in eager}


def parse_bind(pairs: list[str] | None) -> dict[str, Any]:
    """`["repo=me/app", "id=7"]` → `{"repo": "me/app", "id": 7}`: a value that reads as JSON is taken as JSON
    (numbers, true/false, "quoted text"), anything else as text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        name, eq, text = pair.partition("=")
        if not eq or not name:
            raise BindError(f"--bind takes NAME=VALUE, got {pair!r}")
        if name in out:
            raise BindError(f"--bind {name} is given twice")
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = text
        out[name] = value if isinstance(value, (str, int, float, bool)) else text
    return out
