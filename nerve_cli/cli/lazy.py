"""Commands built when used: `nerve --help` imports no command module, `nerve logs` only logs_cmd.

Typer turns every registered command into a Click command (reading each
signature) before it parses anything, and the command modules must be imported
for that: ≈ 30 ms that no single invocation needs. The root group holds a
`LazyCommands` mapping instead: each name maps to where its command lives and
the summary the root's --help lists, and a command is imported and built the
first time it is asked for (run, its --help, shell completion of its name).
`tests/test_cli_help.py` keeps every summary equal to its command's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer.models import CommandInfo, TyperInfo


@dataclass(frozen=True)
class Lazy:
    module: str  # under nerve_cli.cli
    attr: str  # a command function, or a Typer app (then the command is a group)
    summary: str  # what the root's --help lists for it: its help's first sentence
    context_settings: dict[str, Any] | None = None

    def build(self, name: str, root: typer.Typer) -> Any:
        target = getattr(importlib.import_module(f"nerve_cli.cli.{self.module}"), self.attr)
        if isinstance(target, typer.Typer):  # what `root.add_typer(target, name=name)` would have built
            return typer.main.get_group_from_info(
                TyperInfo(target, name=name), pretty_exceptions_short=root.pretty_exceptions_short,
                suggest_commands=root.suggest_commands, rich_markup_mode=root.rich_markup_mode)
        return typer.main.get_command_from_info(  # what `root.command(name)(target)` would have built
            CommandInfo(name=name, callback=target, context_settings=self.context_settings),
            pretty_exceptions_short=root.pretty_exceptions_short, rich_markup_mode=root.rich_markup_mode)


class LazyCommands(MutableMapping):
    """A group's `commands`: names and summaries at once, each command built on first access."""

    def __init__(self, root: typer.Typer, table: dict[str, Lazy], built: MutableMapping[str, Any]) -> None:
        self.root, self.table, self.built = root, dict(table), dict(built)

    def summary(self, name: str) -> str | None:
        """The root's --help line for `name` without building it (None: built already, ask the command)."""
        return None if name in self.built or name not in self.table else self.table[name].summary

    def __getitem__(self, name: str) -> Any:
        if name not in self.built:
            if name not in self.table:
                raise KeyError(name)
            self.built[name] = self.table[name].build(name, self.root)
        return self.built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        self.built.pop(name, None)
        self.table.pop(name, None)

    def __iter__(self) -> Iterator[str]:  # names only: listing, suggestions and completion build nothing
        yield from self.table
        yield from (name for name in self.built if name not in self.table)

    def __len__(self) -> int:
        return len(set(self.table) | set(self.built))

    def __contains__(self, name: object) -> bool:
        return name in self.table or name in self.built
