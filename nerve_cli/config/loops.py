"""Loops that pass through what a compute causes: a thread's transitions, an emit, the fleet.

A signal that wakes a sense is an edge nerve.yaml shows (`on:`); what makes a
chain of causes able to feed itself is an edge it does not: a sense whose code
returns a workflow directive starts threads whose transitions are
`nerve-threads`' signals; a sense whose code emits to a channel feeds that
channel's listeners; a sense or channel published to the fleet comes back
through another host's senses. This draws those edges (reading the senses' code,
never importing it), finds the loops (strongly connected components, one
shortest loop shown for each) and warns about each one not declared: by a
`max_depth:` on a reflex of a sense in it, or by a `loops:` entry naming it.
The engine bounds every chain anyway (`engine.max_causal_depth`); the warning
says so before it runs.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Iterator

from nerve_cli.config.graph import components, loop_through
from nerve_cli.config.model import EngineConfig
from nerve_cli.config.problems import Loc, Severity
from nerve_cli.names import HEALTH_SENSE, THREADS_SENSE

Finding = tuple[Loc, Severity, str]
FLEET = "(fleet)"  # the node other hosts stand for: what is published comes back through what is subscribed
THREAD = "(thread)"  # a workflow thread started by a directive: its transitions are nerve-threads' signals
DEFAULT_BOUND = EngineConfig.model_fields["max_causal_depth"].default


def causal_loops(data: dict, senses: dict, home: Path | None) -> Iterator[Finding]:
    """One warning per undeclared loop through a directive, an emit, nerve-threads, nerve-health or the fleet."""
    reflexes = [r for r in _list(data.get("reflexes")) if isinstance(r, dict)]
    edges: dict[str, set[str]] = {}
    into: dict[str, int] = {}  # sense → the first reflex with `on:` that runs it (where the warning points)
    for i, reflex in enumerate(_list(data.get("reflexes"))):
        if not isinstance(reflex, dict) or reflex.get("enabled", True) is False or reflex.get("lazy") is True:
            continue
        target = reflex.get("sense")
        if not isinstance(target, str) or target not in senses:
            continue
        for source in _list(reflex.get("on")):
            if isinstance(source, str):
                edges.setdefault(source, set()).add(target)
                into.setdefault(target, i)
    caused = _caused(senses, home)
    for sense, (directs, channels) in caused.items():
        if directs:
            edges.setdefault(sense, set()).add(THREAD)
        for channel in channels:
            edges.setdefault(sense, set()).add(channel)
    if caused and any(d for d, _ in caused.values()):
        edges.setdefault(THREAD, set()).add(THREADS_SENSE)
    _fleet_edges(data, edges)
    bounded = {r.get("sense") for r in reflexes if isinstance(r.get("max_depth"), int)}
    declared = [set(map(str, entry)) for entry in _list(data.get("loops")) if isinstance(entry, list)]
    engine = data.get("engine")
    bound = engine.get("max_causal_depth", DEFAULT_BOUND) if isinstance(engine, dict) else DEFAULT_BOUND
    loose = {THREADS_SENSE, HEALTH_SENSE, FLEET, THREAD} | {c for _, chans in caused.values() for c in chans}
    for component in components(edges):
        if not component & loose or component & bounded or not component & set(senses):
            continue  # (a loop with no sense of this host in it has no compute to bound here)
        if any(entry and all(_names(name, component, data) for name in entry) for entry in declared):
            continue
        start = min(n for n in component if n in senses)
        loop = loop_through(start, component, edges)
        shown = " → ".join([*loop, loop[0]])
        members = sorted(n for n in component if n in senses)
        where = next((into[s] for s in members if s in into), None)
        loc: Loc = ("reflexes", where, "on") if where is not None else ("senses", start)
        yield loc, "warning", (
            f"a loop through what computes cause: {shown} ({_how(component)}); every turn goes one causal hop "
            f"deeper, and past {bound} (engine.max_causal_depth) the engine refuses its directive or emit. If "
            f"you mean it, declare it: `max_depth: N` on the reflex of {members[0] if members else start}, or "
            f"`loops: [[{', '.join(members or [start])}]]`")


def _how(component: set[str]) -> str:
    ways = []
    if THREAD in component:
        ways.append("a directive starts a thread; its transitions are nerve-threads' signals")
    if FLEET in component:
        ways.append("what this host publishes comes back from another host")
    if not ways:
        ways.append("a sense emits to a channel it hears again")
    return "; ".join(ways)


def _names(name: str, component: set[str], data: dict) -> bool:
    """Whether a `loops:` entry's name is part of `component` (a workflow's name stands for its threads)."""
    workflows = data.get("workflows")
    return name in component or (isinstance(workflows, dict) and name in workflows and THREAD in component)


def _fleet_edges(data: dict, edges: dict[str, set[str]]) -> None:
    fleet = data.get("fleet")
    if not isinstance(fleet, dict) or fleet.get("enabled", True) is False:
        return
    publish, subscribe = fleet.get("publish"), fleet.get("subscribe")
    publish = publish if isinstance(publish, dict) else {}
    subscribe = subscribe if isinstance(subscribe, dict) else {}
    out = [n for key in ("senses", "channels") for n in _list(publish.get(key)) if isinstance(n, str)]
    back = [n for key in ("senses", "channels") for n in _list(subscribe.get(key)) if isinstance(n, str)]
    if not out or not back:
        return
    for name in out:
        edges.setdefault(name, set()).add(FLEET)
    for name in back:
        edges.setdefault(FLEET, set()).add(name)
    # another host's sense is heard as HOST/SENSE, a fleet channel as its name: both are already sources above


def _caused(senses: dict, home: Path | None) -> dict[str, tuple[bool, set[str]]]:
    """sense → (its code may return a workflow directive, the channels it emits to by name)."""
    if home is None:
        return {}
    out = {}
    for name, settings in senses.items():
        if isinstance(settings, dict) and settings.get("enabled", True) is False:
            continue
        path = home / "senses" / str(name) / "sense.py"
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue  # the code check says what is wrong with it
        directs, channels = False, set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if any(k.arg == "workflow" for k in node.keywords) or (called == "SenseResult" and len(node.args) > 1):
                directs = True
            if called == "emit" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                channels.add(node.args[0].value)
        if directs or channels:
            out[str(name)] = (directs, channels)
    return out


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
