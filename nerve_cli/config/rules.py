"""Checks that need the whole file: references between senses, reflexes and channels.

They run on the plain parsed data even when pydantic found type errors, so one
`nerve config check` shows every problem. Each check is defensive about types:
a wrongly typed value is pydantic's to report, not ours.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from nerve_cli.config.agents import check_agents, heard_channels
from nerve_cli.config.fleet import check_fleet, check_remote_sources, is_remote_source, subscribed
from nerve_cli.config.graph import components as _components
from nerve_cli.config.graph import loop_through as _loop_through
from nerve_cli.config.loops import causal_loops
from nerve_cli.config.model import BUILTIN_SENSES, HEALTH_SENSE, parse_duration
from nerve_cli.config.paths import resolve
from nerve_cli.config.problems import Loc, Severity
from nerve_cli.config.waits import waited_sources
from nerve_cli.home import Layout
from nerve_cli.names import is_pattern, pattern_matches

Finding = tuple[Loc, Severity, str]

WORKFLOW_KIND = (
    "there is no `workflow:` reflex kind: reflexes only schedule senses, and a sense launches workflows. "
    "To launch workflow `{name}`, have a sense return "
    '`SenseResult(payload, workflow="{name}|5|what to do")` (the directive is `name|maxRounds|prompt`); '
    "list that sense here with `sense:` instead"
)


@dataclass
class Channel:
    """An `on:` name that is not a sense: an external channel fed by `nerve emit NAME`."""

    name: str
    reflexes: list[int] = field(default_factory=list)
    did_you_mean: str | None = None
    fed_by: str = "emit"  # "fleet": other hosts send its events (`fleet.subscribe`)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reflexes": self.reflexes, "did_you_mean": self.did_you_mean, "fed_by": self.fed_by}


def nearest(name: str, candidates: Any) -> str | None:
    """The closest candidate to a probable typo, if any is close enough."""
    names = [c for c in candidates if isinstance(c, str)]
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return found[0] if found else None


def hint(name: str, candidates: Any, what: str = "") -> str:
    close = nearest(name, candidates)
    return f"; did you mean {what}`{close}`?" if close else ""


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def workflow_kind_reflexes(data: dict) -> set[int]:
    """Indexes of reflexes written in the removed `- workflow: X` form."""
    return {i for i, r in enumerate(_names(data.get("reflexes"))) if isinstance(r, dict) and "workflow" in r}


def check_all(data: dict, home: Path | None = None) -> tuple[list[Finding], list[Channel]]:
    """`home`, when known, lets absolute path patterns be checked against the instance's own data/ too."""
    senses = _mapping(data.get("senses"))
    findings = list(_check_senses(senses))
    findings.extend(_check_groups(_mapping(data.get("groups")), senses))
    channels: dict[str, Channel] = {}
    for i, reflex in enumerate(_names(data.get("reflexes"))):
        if isinstance(reflex, dict):
            findings.extend(_check_reflex(i, reflex, senses, channels))
    findings.extend(_cycles(data, senses))
    findings.extend(causal_loops(data, senses, home))
    findings.extend(check_fleet(data, hint))
    findings.extend(check_remote_sources(data))
    for name in subscribed(data) & set(channels):
        channels[name].fed_by, channels[name].did_you_mean = "fleet", None
    findings.extend(_check_paths(_names(data.get("reflexes")), home))
    declared = _mapping(data.get("channels"))
    used = _used_elsewhere(data, home) | heard_channels(data)  # agents listen too
    patterns = {n for r in _names(data.get("reflexes")) if isinstance(r, dict) for n in _names(r.get("on"))
                if isinstance(n, str) and is_pattern(n)}
    findings.extend(_check_channels(declared, senses, {**{n: Channel(n) for n in used}, **channels}, patterns))
    fed = set(channels) | {n for n in declared if isinstance(n, str)} | subscribed(data)
    findings.extend(check_agents(data, nearest, subscribed(data), fed))
    for name in declared:
        if isinstance(name, str) and name not in senses and name not in BUILTIN_SENSES:
            channels.setdefault(name, Channel(name))
    findings.extend(_check_readings(data, senses))
    findings.extend(_lazy_peer_loops(data, senses))
    return findings, list(channels.values())


def _check_paths(reflexes: list, home: Path | None) -> Iterator[Finding]:
    """A file reflex must not watch the instance's data/ (every compute writes there: a feedback loop), and a
    pattern must not share its name with a channel the same sense listens to (both name a source)."""
    listened: dict[str, set[str]] = {}
    for reflex in reflexes:
        if isinstance(reflex, dict) and isinstance(reflex.get("sense"), str):
            listened.setdefault(reflex["sense"], set()).update(n for n in _names(reflex.get("on")) if isinstance(n, str))
    base = home if home is not None else Path("/nerve-instance")  # relative patterns are checked either way
    data = Layout(base).data
    for i, reflex in enumerate(reflexes):
        if not isinstance(reflex, dict):
            continue
        for j, text in enumerate(_names(reflex.get("paths"))):
            if not isinstance(text, str) or not text.strip():
                continue
            known = home is not None or not text.startswith(("/", "~"))  # else where data/ is is unknown here
            if known and resolve(text, base).may_contain(data):
                yield ("reflexes", i, "paths", j), "error", (
                    f"`{text}` would watch the instance's own data/ folder, where every compute writes: each "
                    "change would trigger another compute (a feedback loop); point it at your files instead")
            if text in listened.get(str(reflex.get("sense")), ()):
                yield ("reflexes", i, "paths", j), "error", (
                    f"`{text}` is also a channel in this sense's on: list; rename the channel (both would be "
                    "called that in trigger.events)")


def _used_elsewhere(data: dict, home: Path | None) -> set[str]:
    """Channels used by more than reflexes: published to the fleet, or waited for by a workflow (its file's
    literal `wait_for_event` calls, when the instance folder is known)."""
    fleet = _mapping(data.get("fleet"))
    used = {c for c in _names(_mapping(fleet.get("publish")).get("channels")) if isinstance(c, str)}
    if home is not None:
        names = [n for n in _mapping(data.get("workflows")) if isinstance(n, str)]
        used |= waited_sources([Path(home) / "workflows" / f"{n}.py" for n in names])
    return used


def _check_channels(declared: dict, senses: dict, listened: dict[str, Channel],
                    listened_patterns: Iterable[str] = ()) -> Iterator[Finding]:
    """The `channels:` section names external channels: never a sense; one nobody listens to (by name or by a
    pattern) is likely a typo."""
    listened_patterns = list(listened_patterns)
    for name in declared:
        if not isinstance(name, str):
            continue
        if name in senses or name in BUILTIN_SENSES:
            yield ("channels", name), "error", (
                f"`{name}` is a sense: senses emit their own signals; a channel here is an external one, "
                "fed by `nerve emit` or a webhook")
        elif name not in listened and not any(pattern_matches(p, name) for p in listened_patterns):
            yield ("channels", name), "warning", (
                f"no reflex listens to channel `{name}`: its events are stored until one does"
                f"{hint(name, listened, 'channel ')}")


def _check_senses(senses: dict) -> Iterator[Finding]:
    for name, settings in senses.items():
        if name in BUILTIN_SENSES:
            yield ("senses", name), "error", (
                f"`{name}` is the engine's built-in sense and cannot be defined here; "
                f"pick another name (you can still listen to it with `on: [{name}]`)"
            )
        yield from _check_peers(name, _mapping(settings), senses)


def _check_groups(groups: dict, senses: dict) -> Iterator[Finding]:
    """A `groups:` entry no sense uses is almost always a typo of a group name."""
    used = {g for s in senses.values() if isinstance(g := _mapping(s).get("group", "default"), str)}
    for name in groups:
        if name not in used:
            yield ("groups", name), "warning", (
                f"no sense is in group `{name}`, so these limits apply to nothing{hint(str(name), used, 'group ')}"
            )


def _check_peers(name: str, settings: dict, senses: dict) -> Iterator[Finding]:
    enabled = settings.get("enabled", True) is not False
    for j, peer in enumerate(_names(settings.get("peers"))):
        if not isinstance(peer, str):
            continue
        loc = ("senses", name, "peers", j)
        if peer == name:
            yield loc, "error", f"sense `{name}` lists itself as a peer; its own database is the `db` argument"
        elif peer in BUILTIN_SENSES:
            yield loc, "error", (f"`{peer}` is built in and has no database a sense can read as a peer; "
                                 f"listen to its signals with `on: [{peer}]`")
        elif peer not in senses:
            yield loc, "error", f"peer `{peer}` is not a sense in `senses:`{hint(peer, senses)}"
        elif enabled and _mapping(senses[peer]).get("enabled", True) is False:
            yield loc, "warning", f"peer `{peer}` is disabled: its database will stop changing"


def _check_reflex(i: int, reflex: dict, senses: dict, channels: dict[str, Channel]) -> Iterator[Finding]:
    if "workflow" in reflex:
        name = reflex["workflow"] if isinstance(reflex["workflow"], str) else "NAME"
        yield ("reflexes", i, "workflow"), "error", WORKFLOW_KIND.format(name=name)
        return
    target = reflex.get("sense")
    yield from _check_target(i, target, reflex, senses)
    yield from _check_trigger(i, reflex)
    for j, source in enumerate(_names(reflex.get("on"))):
        if not isinstance(source, str):
            continue
        if source == target:
            yield ("reflexes", i, "on", j), "warning", (
                f"sense `{target}` listens to its own signals: each signal schedules another compute "
                "(only `throttle` spaces them)"
            )
        if source in senses or source in BUILTIN_SENSES or is_pattern(source):
            continue  # a pattern is listed with what it matches (config.patterns)
        close = None if is_remote_source(source) else nearest(source, [*senses, *BUILTIN_SENSES])
        channel = channels.setdefault(source, Channel(source, did_you_mean=close))
        channel.reflexes.append(i)
        if channel.did_you_mean:
            yield ("reflexes", i, "on", j), "warning", (
                f"`{source}` is not a sense, so it is an external channel fed only by `nerve emit {source}`; "
                f"did you mean sense `{channel.did_you_mean}`?"
            )


def _check_target(i: int, target: Any, reflex: dict, senses: dict) -> Iterator[Finding]:
    if not isinstance(target, str):
        return
    loc = ("reflexes", i, "sense")
    if target == HEALTH_SENSE:
        yield loc, "error", (
            f"`{HEALTH_SENSE}` is built in and runs every `engine.health_interval`; a reflex cannot schedule it"
        )
    elif target in BUILTIN_SENSES:
        yield loc, "error", f"`{target}` is built in and runs when a thread changes status; a reflex cannot schedule it"
    elif target not in senses:
        yield loc, "error", f"`{target}` is not a sense in `senses:`{hint(target, senses)}"
    elif reflex.get("enabled", True) is not False and _mapping(senses[target]).get("enabled", True) is False:
        yield loc, "warning", f"sense `{target}` is disabled, so this reflex never fires"


def _check_trigger(i: int, reflex: dict) -> Iterator[Finding]:
    interval = reflex.get("interval")
    if interval is None and not reflex.get("on") and reflex.get("cron") is None and not reflex.get("paths"):
        yield ("reflexes", i), "error", (
            "this reflex has no `interval`, `on`, `cron` or `paths`, so it would never fire; "
            "add `interval: 10s`, `on: [some-sense]`, `cron: '0 9 * * *'` or `paths: [notes/*.md]`"
        )
        return
    try:
        too_short = interval is not None and parse_duration(interval) <= 0
    except ValueError:
        return  # pydantic reports the bad duration
    if too_short:
        yield ("reflexes", i, "interval"), "error", f"expected an interval longer than 0, got {interval!r}"


def _params(reflex: dict) -> list[str]:
    bindings = _mapping(reflex.get("bindings"))
    return [v[1:] for v in bindings.values() if isinstance(v, str) and v.startswith("$")]


def _check_readings(data: dict, senses: dict) -> Iterator[Finding]:
    """A sense that binds parameters runs only when read with them; a source has one way of being read."""
    reflexes = [(i, r) for i, r in enumerate(_names(data.get("reflexes")))
                if isinstance(r, dict) and r.get("enabled", True) is not False and isinstance(r.get("sense"), str)]
    bound = {r["sense"]: i for i, r in reflexes if _params(r)}
    seen: dict[tuple[str, str], tuple[int, Any]] = {}
    for i, reflex in reflexes:
        sense = reflex["sense"]
        if sense in bound and reflex.get("lazy") is not True:
            yield ("reflexes", i), "error", (
                f"sense `{sense}` binds parameters (reflexes[{bound[sense]}]), so it runs only when read with "
                "their values; this reflex could never say which: make it `lazy: true` or remove it")
        way = (reflex.get("lazy") is True, _mapping(reflex.get("bindings")))
        for j, source in enumerate(_names(reflex.get("on"))):
            if not isinstance(source, str):
                continue
            earlier = seen.setdefault((sense, source), (i, way))
            if earlier[0] != i and earlier[1] != way:
                yield ("reflexes", i, "on", j), "error", (
                    f"`{source}` is a source of `{sense}` in reflexes[{earlier[0]}] too, read another way "
                    "(lazy or bindings differ); a sense reads each source one way: list it once")


def _lazy_peer_loops(data: dict, senses: dict) -> Iterator[Finding]:
    """Reading a lazy peer waits for its compute; senses that do so in a loop would wait for each other."""
    lazy = {r.get("sense") for r in _names(data.get("reflexes"))
            if isinstance(r, dict) and r.get("lazy") is True and r.get("enabled", True) is not False}
    edges = {name: {p for p in _names(_mapping(settings).get("peers")) if isinstance(p, str) and p in lazy}
             for name, settings in senses.items()}
    for component in _components({k: v for k, v in edges.items() if v}):
        loop = _loop_through(min(component), component, edges)
        yield ("senses", loop[-1], "peers"), "error", (
            "senses read each other as lazy peers: " + " → ".join([*loop, loop[0]])
            + "; each read brings the peer up to date first, so they would wait for each other: "
            "remove one peers: entry or make one of them eager")


def _cycles(data: dict, senses: dict) -> Iterator[Finding]:
    """Warn about loops of two or more senses triggering each other (self-loops are warned above).

    One warning per set of senses that reach each other (a strongly connected
    component), showing one loop through all of it where the edges allow: there
    can be factorially many simple loops (14 senses each listening to all
    others have billions), so they are never enumerated.
    """
    edges: dict[str, set[str]] = {}
    edge_reflex: dict[tuple[str, str], int] = {}
    for i, reflex in enumerate(_names(data.get("reflexes"))):
        if not isinstance(reflex, dict) or reflex.get("enabled", True) is False or reflex.get("lazy") is True:
            continue  # a lazy reflex's source never runs its sense: no loop goes through it
        target = reflex.get("sense")
        if not isinstance(target, str) or target not in senses:
            continue
        for source in _names(reflex.get("on")):
            if isinstance(source, str) and source in senses and source != target:
                edges.setdefault(source, set()).add(target)
                edge_reflex.setdefault((source, target), i)
    for component in _components(edges):
        loop = _loop_through(min(component), component, edges)
        yield ("reflexes", edge_reflex[(loop[-1], loop[0])], "on"), "warning", (
            "senses trigger each other in a loop: " + " → ".join([*loop, loop[0]])
            + "; every signal goes round again (only `throttle` or returning None stops it)"
        )
