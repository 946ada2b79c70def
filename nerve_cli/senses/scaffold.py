"""`nerve sense new`: write senses/<name>/ from templates/sense/, its first migration, register it, commit.

A failure before the nerve.yaml edit removes the half-written folder, so the
command can simply be run again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.config.edit import add_sense
from nerve_cli.config.load import load_config
from nerve_cli.config.model import HEALTH_SENSE, check_name
from nerve_cli.errors import SenseError
from nerve_cli.home import Layout
from nerve_cli.instance.change import Change
from nerve_cli.instance.scaffold import templates_dir
from nerve_cli.schema.migrate import generate_migration

TEMPLATE_FILES = ("schema.py", "sense.py")
DEFAULT_INTERVAL = "1m"


@dataclass(frozen=True)
class NewSense:
    name: str
    group: str
    folder: Path
    files: tuple[Path, ...]  # everything written, migration included
    migration: Path | None
    commit: str | None  # sha, or None when the instance is not a git repo
    notes: tuple[str, ...] = ()  # e.g. that uncommitted edits of nerve.yaml were committed separately first


def sense_template_dir() -> Path:
    return templates_dir("sense")


def check_new_sense(home: Path, name: str, group: str) -> None:
    """Refuse an invalid name or group, or a sense that already exists in nerve.yaml or on disk."""
    for what, value in (("sense", name), ("group", group)):
        try:
            check_name(value)
        except ValueError as exc:
            raise SenseError(f"invalid {what} name: {exc}") from None
    if name == HEALTH_SENSE:
        raise SenseError(f"`{HEALTH_SENSE}` is the engine's built-in sense; pick another name")

    if name in load_config(home).senses:
        raise SenseError(f"sense `{name}` already exists in nerve.yaml (senses.{name}); pick another name")
    folder = Layout(home).sense_dir(name)
    if folder.exists():
        raise SenseError(
            f"{folder} already exists but is not in nerve.yaml; pick another name, "
            f"or remove the folder (or add senses.{name} to nerve.yaml by hand)"
        )


def render(template: str, name: str) -> str:
    return template.replace("{{name}}", name)


def new_sense(home: Path, name: str, group: str = "default") -> NewSense:
    """Scaffold, migrate, register (reflex: every 1m) and commit a new sense."""
    home = Path(home)
    check_new_sense(home, name, group)
    layout = Layout(home)
    folder = layout.sense_dir(name)
    change = Change(home, f"sense new {name}", [layout.config, folder])
    change.protect()
    try:
        written = _write_files(folder, name)
        migration = generate_migration(folder)
        add_sense(home, name, {"group": group}, reflex={"sense": name, "interval": DEFAULT_INTERVAL})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    files = tuple(written + ([migration] if migration else []))
    sha = change.commit([*files, layout.config])
    return NewSense(name, group, folder, files, migration, sha, tuple(change.notes()))


def _write_files(folder: Path, name: str) -> list[Path]:
    template = sense_template_dir()
    (folder / "migrations").mkdir(parents=True)
    out = []
    for filename in TEMPLATE_FILES:
        target = folder / filename
        target.write_text(render((template / filename).read_text(encoding="utf-8"), name), encoding="utf-8")
        out.append(target)
    return out
