"""The `agents:` section: what each coding agent hears, checked like a reflex's `on:` list.

An agent is a listener without code: its sources are named as a
reflex names them — a sense, a built-in (`nerve-health`, `nerve-threads`), an
external channel, another host's sense (`HOST/SENSE`) — and its inbox
(`store.inbox`) keeps a cursor per source. `check_agents` runs on the plain
parsed data beside the reflexes' checks, so `nerve config check` shows every
problem at once: a source that reads as a typo of a sense (did you mean), a
disabled sense, another host's sense this host does not subscribe to, and a
channel nothing feeds.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from nerve_cli.config.fleet import is_remote_source
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig
from nerve_cli.config.problems import Loc, Severity

Finding = tuple[Loc, Severity, str]


def agent_sources(config: NerveConfig, name: str) -> dict[str, str]:
    """{source: its SourceKind} of one agent, in `on:` order (fleet sources are channels: events.db)."""
    return {s: config.source_kind(s) for s in config.agents[name].on}


def heard_channels(data: dict) -> set[str]:
    """The names agents hear that are not senses (external channels), from the plain parsed data."""
    senses = _mapping(data.get("senses"))
    out = set()
    for settings in _mapping(data.get("agents")).values():
        for source in _list(_mapping(settings).get("on")):
            if isinstance(source, str) and source not in senses and source not in BUILTIN_SENSES:
                out.add(source)
    return out


def check_agents(data: dict, nearest: Callable[[str, Any], str | None], subscribed: set[str],
                 fed: set[str]) -> Iterator[Finding]:
    """`fed`: channels something else names (a reflex's on:, `channels:`, webhooks, a fleet subscription)."""
    senses = _mapping(data.get("senses"))
    for name, settings in _mapping(data.get("agents")).items():
        settings = _mapping(settings)
        if isinstance(name, str) and (name in senses or name in BUILTIN_SENSES):
            yield ("agents", name), "warning", (
                f"agent `{name}` has a sense's name; they are kept apart, but `nerve agent` and `nerve sense` "
                "would name different things the same: rename one")
        for j, source in enumerate(_list(settings.get("on"))):
            if not isinstance(source, str):
                continue
            loc = ("agents", name, "on", j)
            if source in senses:
                if _mapping(senses[source]).get("enabled", True) is False and settings.get("enabled", True) is not False:
                    yield loc, "warning", f"sense `{source}` is disabled: agent `{name}` hears nothing from it"
                continue
            if source in BUILTIN_SENSES:
                continue
            if is_remote_source(source):
                if source not in subscribed:
                    yield loc, "warning", (
                        f"`{source}` reads as another host's sense (HOST/SENSE), but this host does not subscribe "
                        "to it: add it to `fleet.subscribe.senses` (until then only `nerve emit` feeds it)")
                continue
            close = nearest(source, [*senses, *BUILTIN_SENSES])
            if close is not None:
                yield loc, "warning", (
                    f"`{source}` is not a sense, so agent `{name}` hears it as an external channel fed only by "
                    f"`nerve emit {source}`; did you mean sense `{close}`?")
            elif source not in fed:
                near = nearest(source, fed)
                yield loc, "warning", (
                    f"agent `{name}` hears `{source}`, a channel nothing else names: only `nerve emit {source}` "
                    "(or the socket, MCP) feeds it" + (f"; did you mean channel `{near}`?" if near else ""))


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
