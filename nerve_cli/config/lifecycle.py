"""Soft delete: turn senses and workflows off and on, with the sense cascade.

Nothing is ever deleted; things get `enabled: false`. Disabling sense X also
disables what cannot work without it:

- every reflex whose `sense:` is X            ("triggers X")
- every reflex whose `on:` lists X            ("listens to X")
- every sense that lists X in `peers:`        ("reads X as a peer"), and that sense's own cascade.

Items already off are left alone. Each item the cascade turns off carries the
marker `# nerve: disabled with X` (see `lifecycle_marks`), so `nerve sense enable
X --cascade` can bring back exactly those, and a plain `enable X` can say what
is still off. Disabling a workflow makes the engine refuse directives for it and
cascades nowhere (no reflex launches a workflow: senses do, by directive); nor does
disabling a reflex.

The planning functions are pure (config + markers in, plan out); `disable_sense`,
`enable_sense` and `set_workflow` load nerve.yaml, plan, and apply the plan as one
validated, atomic, comment-keeping edit and one commit. A running engine picks
the change up through its hot reload.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from nerve_cli.config.edit import edit_config
from nerve_cli.config.lifecycle_marks import disable, enable, locate, marks
from nerve_cli.config.load import config_path, read_config, validate
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig, ReflexConfig, format_duration
from nerve_cli.config.problems import count_words, errors_of
from nerve_cli.errors import ConfigError, NerveError
from nerve_cli.home import Layout
from nerve_cli.instance.attic import attic_entries
from nerve_cli.instance.change import Change
from nerve_cli.words import plural

Kind = Literal["sense", "reflex", "workflow"]
Ref = tuple[str, "str | int"]  # ("sense", "d") or ("reflex", 3)


@dataclass(frozen=True)
class Item:
    """One thing a plan turns off or on."""
    kind: Kind
    key: str | int  # a name, or a reflex's index in `reflexes:`
    what: str  # "sense d", "reflexes[1] (b on [a])"
    why: str  # "listens to a", "reads a as a peer", "triggers d (via a → d)"
    sense: str = ""  # the sense a reflex schedules (for the command that brings it back)

    @property
    def ref(self) -> Ref:
        return (self.kind, self.key)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "what": self.what, "why": self.why}


@dataclass
class Plan:
    """What a disable or enable changes. `items` excludes the target itself."""
    kind: Kind
    name: str
    enabled: bool  # the target's state after the plan
    change_target: bool  # False when it already was in that state
    items: list[Item] = field(default_factory=list)  # also turned off (disable) or back on (enable --cascade)
    kept_off: list[tuple[Item, str]] = field(default_factory=list)  # enable --cascade: (item, its new marker root)
    still_off: list[tuple[Item, str]] = field(default_factory=list)  # enable: (item, the sense whose cascade turned it off)
    warnings: list[str] = field(default_factory=list)
    was_marked: str | None = None  # the target itself was turned off by this sense's cascade

    @property
    def changes(self) -> int:
        return int(self.change_target) + len(self.items) + len(self.kept_off)


def describe_reflex(index: int, reflex: ReflexConfig) -> str:
    """`reflexes[2] (b on [a])`, `reflexes[0] (a every 10s)`, `reflexes[4] (c cron 0 9 * * 1-5, on [x])`."""
    return f"reflexes[{index}] ({reflex.sense} {trigger_text(reflex)})"


def trigger_text(reflex: ReflexConfig) -> str:
    parts = []
    if reflex.interval is not None:
        parts.append(f"every {format_duration(reflex.interval)}")
    if reflex.cron is not None:
        parts.append(f"cron {reflex.cron}")
    if reflex.on:
        parts.append(f"on [{', '.join(reflex.on)}]")
    return ", ".join(parts)


def dependents(config: NerveConfig, name: str, *, skip_off: bool = True) -> list[Item]:
    """Everything disabling sense `name` turns off, in cascade order, each with why.

    With `skip_off`, items already disabled are left out (and the cascade does not
    continue through them); without it, this is everything that depends on `name`.
    """
    out: list[Item] = []
    taken: set[Ref] = {("sense", name)}
    queue: list[tuple[str, list[str]]] = [(name, [name])]
    while queue:
        source, chain = queue.pop(0)
        via = f" (via {' → '.join(chain)})" if len(chain) > 1 else ""
        for i, reflex in enumerate(config.reflexes):
            why = "triggers" if reflex.sense == source else "listens to" if source in reflex.on else None
            if why and ("reflex", i) not in taken and (reflex.enabled or not skip_off):
                taken.add(("reflex", i))
                out.append(Item("reflex", i, describe_reflex(i, reflex), f"{why} {source}{via}", reflex.sense))
        for reader, sense in config.senses.items():
            if source in sense.peers and ("sense", reader) not in taken and (sense.enabled or not skip_off):
                taken.add(("sense", reader))
                out.append(Item("sense", reader, f"sense {reader}", f"reads {source} as a peer{via}"))
                queue.append((reader, [*chain, reader]))
    return out


def plan_disable(config: NerveConfig, name: str, marks: dict[Ref, str] | None = None) -> Plan:
    """Turn sense `name` off and cascade; nothing else changes when it already is off."""
    sense = config.senses[name]
    plan = Plan("sense", name, False, sense.enabled, was_marked=(marks or {}).get(("sense", name)))
    if sense.enabled:
        plan.items = dependents(config, name)
    return plan


def plan_enable(
    config: NerveConfig, name: str, marks: dict[Ref, str], *, cascade: bool = False, reflexes: tuple[int, ...] = ()
) -> Plan:
    """Turn sense `name` on; with `cascade`, also what `nerve sense disable name` turned off.

    The reflexes that schedule `name` itself and were turned off with it always
    come back: without them an enabled sense would never run. Without `cascade`,
    the rest (listeners, peer readers) still off because of an earlier cascade
    are listed in `still_off`, never turned on. With it, an item that another disabled sense
    still cuts off stays off (`kept_off`, paired with the sense whose
    `enable --cascade` will bring it back: its marker moves there).
    """
    sense = config.senses[name]
    plan = Plan("sense", name, True, not sense.enabled, was_marked=marks.get(("sense", name)))
    related = dependents(config, name, skip_off=False)
    restore = _marked_by(config, name, marks, related) if cascade else [
        i for i in related if i.kind == "reflex" and i.sense == name and marks.get(i.ref) == name]
    for i in reflexes:
        if config.reflexes[i].enabled:
            plan.warnings.append(f"reflexes[{i}] is already enabled")
        elif ("reflex", i) not in {r.ref for r in restore}:
            restore.append(_reflex_item(config, i, "asked for with --reflex"))
    roots = _roots_once_on(config, name, restore, marks)
    for item in restore:
        blocker = _blocker(config, item, roots)
        if blocker is None:
            plan.items.append(item)
        else:
            plan.kept_off.append((item, roots[blocker]))
    done = {i.ref for i in restore}
    plan.still_off = [(i, marks[i.ref]) for i in related if i.ref in marks and i.ref not in done]
    plan.warnings += [f"sense {name} reads {p} as a peer, and {p} is disabled" for p in sense.peers if p in roots]
    return plan


def _marked_by(config: NerveConfig, name: str, marks: dict[Ref, str], related: list[Item]) -> list[Item]:
    """Items whose marker names `name`: in cascade order, then any the config no longer links to `name`."""
    out = [i for i in related if marks.get(i.ref) == name]
    seen = {i.ref for i in out}
    for (kind, key), root in marks.items():
        if root != name or (kind, key) in seen or kind == "workflow":
            continue
        if kind == "sense":
            out.append(Item("sense", key, f"sense {key}", f"disabled with {name}"))
        else:
            out.append(_reflex_item(config, int(key), f"disabled with {name}"))
    return out


def _reflex_item(config: NerveConfig, index: int, why: str) -> Item:
    reflex = config.reflexes[index]
    return Item("reflex", index, describe_reflex(index, reflex), why, reflex.sense)


def _roots_once_on(config: NerveConfig, name: str, restore: list[Item], marks: dict[Ref, str]) -> dict[str, str]:
    """Senses still off after the plan → the sense whose `enable --cascade` would bring each back.

    A sense being restored that reads a peer still off stays off too, under that peer's root.
    """
    coming = [str(i.key) for i in restore if i.kind == "sense"]
    roots = {n: marks.get(("sense", n)) or n for n, s in config.senses.items() if not s.enabled}
    for n in [name, *coming]:
        roots.pop(n, None)
    changed = True
    while changed:
        changed = False
        for n in coming:
            peer = next((p for p in config.senses[n].peers if p in roots), None)
            if n not in roots and peer is not None:
                roots[n] = roots[peer]
                changed = True
    return roots


def _blocker(config: NerveConfig, item: Item, off: dict[str, str]) -> str | None:
    """The sense still off that cuts `item` off, if any."""
    if item.kind == "sense":
        return next((p for p in config.senses[str(item.key)].peers if p in off), None)
    reflex = config.reflexes[int(item.key)]
    return next((s for s in (reflex.sense, *reflex.on) if s in off), None)


def plan_workflow(config: NerveConfig, name: str, enabled: bool) -> Plan:
    """Workflows cascade nowhere: a disabled one only makes the engine refuse directives for it."""
    return Plan("workflow", name, enabled, config.workflows[name].enabled != enabled)


# -- applying: one validated, atomic, comment-keeping edit and one commit ------------------


@dataclass
class Outcome:
    plan: Plan
    dry_run: bool = False
    sha: str | None = None  # the commit, when the instance is a git repo and something changed
    home: Path | None = None
    notes: list[str] = field(default_factory=list)  # e.g. hand edits of nerve.yaml committed separately first

    @property
    def written(self) -> bool:
        return not self.dry_run and self.plan.changes > 0


def disable_sense(home: Path, name: str, *, dry_run: bool = False) -> Outcome:
    """`nerve sense disable NAME`: the sense and its cascade off, marked, in one edit and one commit."""
    text, config, found = load_for_edit(home)
    check_sense(config, name)
    plan = plan_disable(config, name, found)
    cascade = f"(+{len(plan.items)} by cascade)" if plan.items else ""
    return _apply(home, text, plan, dry_run, f"sense disable {name}", cascade)


def enable_sense(
    home: Path, name: str, *, cascade: bool = False, reflexes: tuple[int, ...] = (), dry_run: bool = False
) -> Outcome:
    """`nerve sense enable NAME [--cascade] [--reflex N]`."""
    text, config, found = load_for_edit(home)
    check_sense(config, name)
    _check_not_in_attic(home, "sense", name)
    for index in reflexes:
        _check_reflex(config, name, index)
    plan = plan_enable(config, name, found, cascade=cascade, reflexes=tuple(dict.fromkeys(reflexes)))
    extra = f"(+{len(plan.items)} restored)" if plan.items else ""
    return _apply(home, text, plan, dry_run, f"sense enable {name}", extra)


def set_workflow(home: Path, name: str, enabled: bool) -> Outcome:
    """`nerve workflow disable|enable NAME`: no cascade."""
    text, config, _ = load_for_edit(home)
    check_workflow(config, name)
    if enabled:
        _check_not_in_attic(home, "workflow", name)
    plan = plan_workflow(config, name, enabled)
    return _apply(home, text, plan, False, f"workflow {'enable' if enabled else 'disable'} {name}")


def load_for_edit(home: Path) -> tuple[str, NerveConfig, dict[Ref, str]]:
    path = config_path(home)
    text = read_config(path)
    result = validate(text, path, for_edit=True)  # its doc's comments hold the cascade's marks
    if result.config is None:
        errors = errors_of(result.problems)
        raise ConfigError(f"{path} is invalid ({count_words(errors)}); fix it first (`nerve config check`)", errors)
    return text, result.config, marks(result.doc)


def check_workflow(config: NerveConfig, name: str) -> None:
    if name not in config.workflows:
        also = " (it is a sense: use `nerve sense ...`)" if name in config.senses else ""
        raise NerveError(f"there is no workflow `{name}` in nerve.yaml (workflows:){hint_name(name, config.workflows)}{also}")


def check_sense(config: NerveConfig, name: str) -> None:
    if name in BUILTIN_SENSES:
        raise NerveError(f"`{name}` is the engine's built-in sense and cannot be turned off or on; "
                         "`engine.health_interval` sets how often it runs")
    if name not in config.senses:
        also = f"; `{name}` is a workflow: use `nerve workflow ...`" if name in config.workflows else ""
        raise NerveError(f"there is no sense `{name}` in nerve.yaml (senses:){hint_name(name, config.senses)}{also}")


def _check_not_in_attic(home: Path, kind: str, name: str) -> None:
    """Turning on a deleted sense or workflow whose code is still in the attic would only break nerve.yaml."""
    layout = Layout(home)
    where = layout.sense_dir(name) if kind == "sense" else layout.workflow_file(name)
    previous = [] if where.exists() else attic_entries(layout, kind, name)
    if previous:
        raise NerveError(f"{kind} `{name}` is deleted: its code is in {previous[-1].relative_to(home)}; move it back "
                         f"to {where.relative_to(home)} first, then `nerve {kind} enable {name}`")


def _check_reflex(config: NerveConfig, name: str, index: int) -> None:
    if not 0 <= index < len(config.reflexes):
        raise NerveError(f"there is no reflexes[{index}] in nerve.yaml ({plural(len(config.reflexes), 'reflex', 'reflexes')})")
    if config.reflexes[index].sense != name:
        raise NerveError(f"reflexes[{index}] schedules sense `{config.reflexes[index].sense}`, not `{name}`; "
                         f"use `nerve sense enable {config.reflexes[index].sense} --reflex {index}`")


def hint_name(name: str, names: Iterable[str]) -> str:
    """`; did you mean `cpu-usage`?` for a typo or a unique part of a name."""
    names = list(names)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not close:
        close = [n for n in names if name in n]
    return f"; did you mean `{close[0]}`?" if len(close) == 1 else ""


def _apply(home: Path, text: str, plan: Plan, dry_run: bool, what: str, detail: str = "") -> Outcome:
    outcome = Outcome(plan, dry_run, home=home)
    if not outcome.written:
        return outcome
    path = config_path(home)
    change = Change(home, what, [path])
    change.protect()  # hand edits of nerve.yaml get their own commit, never ride in this one
    outcome.notes = change.notes()
    write_plan(home, text, plan)
    outcome.sha = change.commit(detail=detail)
    return outcome


def write_plan(home: Path, text: str, plan: Plan) -> None:
    """The plan as one validated, atomic, comment-keeping edit of nerve.yaml (`text` is what it was planned on)."""
    path = config_path(home)
    with edit_config(home) as doc:
        if read_config(path) != text:
            raise NerveError(f"{path} changed while the change was planned; nothing was written, run the command again")
        if plan.change_target:
            _turn(doc, plan.kind, plan.name, plan.enabled, None)
        for item in plan.items:  # the cascade (disable) or what it had turned off (enable --cascade)
            _turn(doc, item.kind, item.key, plan.enabled, plan.name)
        for item, root in plan.kept_off:
            _turn(doc, item.kind, item.key, False, root)


def _turn(doc: Any, kind: str, key: str | int, on: bool, mark: str | None) -> None:
    parent, key = locate(doc, kind, key)
    if on:
        enable(parent, key)
    else:
        disable(parent, key, mark)


def bring_back(item: Item) -> str:
    """The exact command that turns one cascade-disabled item back on."""
    if item.kind == "sense":
        return f"nerve sense enable {item.key}"
    return f"nerve sense enable {item.sense} --reflex {item.key}"
