"""`nerve sense new`: write senses/<name>/ from templates/sense/, its first migration, register it, commit.

`--from RECIPE` writes templates/recipes/<recipe>/ instead (projection,
reaction, wait-all, merge, switch, heartbeat: patterns of the neighbouring
designs on the events contract), and `--on` registers a reflex on those
sources instead of the 1m interval (a heartbeat keeps the interval too, to
notice silence). A failure before the nerve.yaml edit removes the
half-written folder, so the command can simply be run again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.config.edit import add_sense
from nerve_cli.config.load import load_config
from nerve_cli.config.model import BUILTIN_SENSES, check_name
from nerve_cli.errors import SenseError
from nerve_cli.home import Layout
from nerve_cli.instance.attic import attic_entries
from nerve_cli.instance.change import Change
from nerve_cli.instance.scaffold import templates_dir
from nerve_cli.schema.migrate import generate_migration
from nerve_cli.store.events import EventError, check_channel

TEMPLATE_FILES = ("schema.py", "sense.py")
DEFAULT_INTERVAL = "1m"
RECIPES = ("projection", "reaction", "wait-all", "merge", "switch", "heartbeat", "agent-hooks")
JOINS = ("wait-all", "merge")  # recipes that combine several sources
WATCHES = {"heartbeat": DEFAULT_INTERVAL}  # recipes that also run on an interval (to notice silence)


@dataclass(frozen=True)
class NewSense:
    name: str
    group: str
    folder: Path
    files: tuple[Path, ...]  # everything written, migration included
    migration: Path | None
    commit: str | None  # sha, or None when the instance is not a git repo
    notes: tuple[str, ...] = ()  # e.g. that uncommitted edits of nerve.yaml were committed separately first
    recipe: str | None = None
    on: tuple[str, ...] = ()  # the reflex's sources; empty: the 1m interval
    enabled: bool = True  # False: registered with `enabled: false`, to be tried before it runs
    reflex: dict | None = None  # the reflex written for it (its sense, on: or interval)


def sense_template_dir(recipe: str | None = None) -> Path:
    return templates_dir("sense") if recipe is None else templates_dir("recipes") / recipe


def check_recipe(name: str, recipe: str | None, on: tuple[str, ...]) -> None:
    """A known recipe with the sources it needs; sources that are names a reflex could list."""
    if recipe is not None and recipe not in RECIPES:
        raise SenseError(f"unknown recipe {recipe!r}; --from takes one of: {', '.join(RECIPES)}")
    for source in on:
        try:
            check_channel(source)
        except EventError as exc:
            raise SenseError(f"--on {source!r}: {exc}") from None
        if source == name:
            raise SenseError(f"--on {source}: a sense cannot listen to its own signals here; list other sources")
    if recipe is not None and not on:
        example = "task.created,task.closed" if recipe in JOINS else "task.created"
        raise SenseError(f"--from {recipe} listens to events: give its sources with --on, e.g. --on {example}")
    if recipe in JOINS and len(set(on)) < 2:
        raise SenseError(f"--from {recipe} combines several sources: give two or more with --on, e.g. --on a,b")


def check_new_sense(home: Path, name: str, group: str) -> None:
    """Refuse an invalid name or group, or a sense that already exists in nerve.yaml or on disk."""
    for what, value in (("sense", name), ("group", group)):
        try:
            check_name(value)
        except ValueError as exc:
            raise SenseError(f"invalid {what} name: {exc}") from None
    if name in BUILTIN_SENSES:
        raise SenseError(f"`{name}` is the engine's built-in sense; pick another name")

    layout = Layout(home)
    if name in load_config(home).senses:
        deleted = attic_entries(layout, "sense", name)
        if deleted and not layout.sense_dir(name).exists():
            where = deleted[-1].relative_to(layout.home)
            raise SenseError(
                f"sense `{name}` was deleted: its code is in {where} and nerve.yaml keeps senses.{name} "
                f"(disabled) until `nerve gc` collects it. Free the name now with `nerve gc --older-than 0s`, "
                f"or bring the sense back: move {where} to senses/{name}, then `nerve sense enable {name}`")
        raise SenseError(f"sense `{name}` already exists in nerve.yaml (senses.{name}); pick another name")
    folder = layout.sense_dir(name)
    if folder.exists():
        raise SenseError(
            f"{folder} already exists but is not in nerve.yaml; pick another name, "
            f"or remove the folder (or add senses.{name} to nerve.yaml by hand)"
        )


def render(template: str, name: str) -> str:
    return template.replace("{{name}}", name)


def new_sense(home: Path, name: str, group: str = "default", *, recipe: str | None = None,
              on: tuple[str, ...] = (), enabled: bool = True) -> NewSense:
    """Scaffold (from the template or a recipe), migrate, register (every 1m, or `on:` sources) and commit.

    `enabled=False` registers it off (`enabled: false`): tried with a dry run, then enabled."""
    home = Path(home)
    on = tuple(dict.fromkeys(on))
    check_new_sense(home, name, group)
    check_recipe(name, recipe, on)
    layout = Layout(home)
    folder = layout.sense_dir(name)
    change = Change(home, f"sense new {name}" + (f" --from {recipe}" if recipe else ""), [layout.config, folder])
    change.protect()
    reflex = {"sense": name, "on": list(on)} if on else {"sense": name, "interval": DEFAULT_INTERVAL}
    if recipe in WATCHES:
        reflex["interval"] = WATCHES[recipe]
    try:
        written = _write_files(folder, name, recipe)
        migration = generate_migration(folder)
        add_sense(home, name, {"group": group} if enabled else {"group": group, "enabled": False}, reflex=reflex)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    files = tuple(written + ([migration] if migration else []))
    sha = change.commit([*files, layout.config])
    return NewSense(name, group, folder, files, migration, sha, tuple(change.notes()), recipe, on, enabled, reflex)


def _write_files(folder: Path, name: str, recipe: str | None = None) -> list[Path]:
    template = sense_template_dir(recipe)
    (folder / "migrations").mkdir(parents=True)
    out = []
    for filename in TEMPLATE_FILES:
        target = folder / filename
        target.write_text(render((template / filename).read_text(encoding="utf-8"), name), encoding="utf-8")
        out.append(target)
    return out
