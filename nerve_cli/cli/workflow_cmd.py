from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, not_available

app = typer.Typer(help="Create, run and manage workflows.", no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="Workflow name.")]


@app.command("new")
def new(name: Name, home: HomeOption = None) -> None:
    """Scaffold a workflow with two roles and a moderator, register and commit it.

    Example: nerve workflow new code-review
    """
    not_available("workflow new")


@app.command("list")
def list_(home: HomeOption = None, json_: JsonOption = False) -> None:
    """List workflows with their config and thread counts by status.

    Example: nerve workflow list
    """
    not_available("workflow list")


@app.command("run")
def run(
    name: Name,
    prompt: Annotated[str, typer.Option("--prompt", help="The start message's content.")],
    max_rounds: Annotated[Optional[int], typer.Option("--max-rounds", help="Round limit (capped by engine.max_rounds).")] = None,
    home: HomeOption = None,
) -> None:
    """Start a thread now (through the running engine, or standalone).

    Example: nerve workflow run code-review --prompt "review PR 12" --max-rounds 6
    """
    not_available("workflow run")


@app.command("disable")
def disable(name: Name, home: HomeOption = None) -> None:
    """Disable a workflow: directives for it are refused (nothing is deleted).

    Example: nerve workflow disable cleanup
    """
    not_available("workflow disable")


@app.command("enable")
def enable(name: Name, home: HomeOption = None) -> None:
    """Enable a workflow again.

    Example: nerve workflow enable cleanup
    """
    not_available("workflow enable")
