"""The reference pages are made from the code (scripts/gen_reference.py), never copied by hand: a committed page
that differs from what the script writes fails here, and every command, option, nerve.yaml key, error type, log
kind and metric family has its entry."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
import typing
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel

from nerve_cli.cli.app import app
from nerve_cli.config.model import NerveConfig
from nerve_cli.errors import ErrorType
from nerve_cli.vocab.logrows import LogKind

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.fast


def generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_no_generated_page_is_stale() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in generator().render().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"stale reference pages (run `make reference`): {stale}"


def test_every_command_and_option_has_its_entry() -> None:
    text = page("reference/cli.md")
    sections = dict(re.findall(r"^## `(nerve[^`]*)`\n(.*?)(?=^## |\Z)", text, re.M | re.S))

    def walk(command, path):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:
                yield from walk(sub, f"{path} {name}")

    commands = list(walk(typer.main.get_command(app), "nerve"))
    assert len(commands) > 40
    for path, command in commands:
        assert path in sections, f"{path} has no section in docs/reference/cli.md"
        for param in command.params:
            for opt in [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]:
                if opt not in ("--help", "--home"):
                    assert opt in sections[path], f"{path} {opt} is missing from its section in docs/reference/cli.md"


def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        keys.append(key)
        annotation = field.annotation
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _keys(annotation, key + ".")
        elif typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1 \
                and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            keys += _keys(args[0], key + ".")
        elif typing.get_origin(annotation) in (tuple, list) and args and isinstance(args[0], type) \
                and issubclass(args[0], BaseModel):
            keys += _keys(args[0], key + "[].")
        elif typing.get_origin(annotation) is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            keys += _keys(args[1], f"{key}.{name[0].upper()}.")
    return keys


def test_every_nerve_yaml_key_has_its_entry_with_a_description() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| [^|]+ \| [^|]+ \| (.*) \|$",
                                                        page("reference/config.md"), re.M)}
    keys = _keys(NerveConfig, "")
    assert len(keys) > 90
    missing = [k for k in keys if k not in rows]
    assert not missing, f"nerve.yaml keys without a row in docs/reference/config.md: {missing}"
    assert all(rows[k].strip() for k in keys)


def test_every_error_type_log_kind_and_metric_has_its_entry() -> None:
    errors = re.findall(r"^### `([a-z_]+)`$", page("troubleshooting.md"), re.M)
    assert errors == [t.value for t in ErrorType]
    log = set(re.findall(r"^\| `(\w+)` \| `(\w+)` \|", page("reference/log.md"), re.M))
    assert log == {(k.source.value, k.type) for k in LogKind}
    metrics = page("reference/metrics.md")
    for name, _kind, _doc, _labels in generator().metric_families():
        assert f"`{name}" in metrics, name


def _blocks(page: str) -> list[list[str]]:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return [block.split("\n")[1:] for block in text.split("```text")[1:]]


def test_the_house_drawings_in_development_name_every_package_and_room_in_its_row() -> None:
    """docs/development.md draws the layers and rooms tests/test_import_graph.py holds, and the package tree: a
    package or room added to the code and not to the drawings fails here, so the drawings cannot go stale."""
    from test_import_graph import LAYERS, ROOMS

    layers, rooms, tree = _blocks("development.md")[:3]
    known = {name for row in LAYERS for name in row if name not in ("", "__main__")}
    drawn = []
    for line in layers:
        names = []
        for token in line.split():
            if token not in known:
                break
            names.append(token)
        if names:
            drawn.append(names)
    assert drawn == [[n for n in row if n not in ("", "__main__")] for row in LAYERS if row != ["__main__"]], drawn
    room_names = {f"{package}/{name}" for package, rows in ROOMS.items() for row in rows for name in row if name}
    shown = " ".join(rooms)
    missing = sorted(r for r in room_names if r not in shown)
    assert not missing, f"rooms not drawn in docs/development.md: {missing}"
    packages = sorted(p.name for p in (ROOT / "nerve_cli").iterdir()
                      if p.is_dir() and any(p.glob("*.py")))
    missing = [p for p in packages if not any(line.strip().startswith(f"{p}/") for line in tree)]
    assert not missing, f"packages not in docs/development.md's tree: {missing}"
