from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli import sense_migrate, sense_reset
from nerve_cli.cli.common import HomeOption, JsonOption, not_available

app = typer.Typer(help="Create, run and inspect senses.", no_args_is_help=True)
app.command("migrate")(sense_migrate.migrate)
app.command("reset")(sense_reset.reset)

Name = Annotated[str, typer.Argument(help="Sense name.")]


@app.command("new")
def new(
    name: Name,
    group: Annotated[str, typer.Option("--group", help="Worker group to run it in.")] = "default",
    home: HomeOption = None,
) -> None:
    """Scaffold a new sense, generate its first migration, register and commit it.

    Example: nerve sense new open-prs --group github
    """
    not_available("sense new")


@app.command("list")
def list_(home: HomeOption = None, json_: JsonOption = False) -> None:
    """List senses with their group, triggers and last signal.

    Example: nerve sense list
    """
    not_available("sense list")


@app.command("show")
def show(
    name: Name,
    last: Annotated[int, typer.Option("--last", "-n", help="How many recent signals to show.")] = 10,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Show a sense: config, tables, recent signals.

    Example: nerve sense show cpu-usage -n 20
    """
    not_available("sense show")


@app.command("compute")
def compute(name: Name, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Run one compute now (through the running engine, or in a fresh worker).

    Example: nerve sense compute cpu-usage --json
    """
    not_available("sense compute")


@app.command("disable")
def disable(
    name: Name,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what the cascade would touch.")] = False,
    home: HomeOption = None,
) -> None:
    """Disable a sense and everything that depends on it (nothing is deleted).

    Example: nerve sense disable disk-usage --dry-run
    """
    not_available("sense disable")


@app.command("enable")
def enable(name: Name, home: HomeOption = None) -> None:
    """Enable a sense again (says what the cascade left disabled).

    Example: nerve sense enable disk-usage
    """
    not_available("sense enable")
