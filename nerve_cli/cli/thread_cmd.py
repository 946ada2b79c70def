from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, not_available

app = typer.Typer(help="Inspect workflow threads.", no_args_is_help=True)


@app.command("list")
def list_(
    status: Annotated[Optional[str], typer.Option("--status", help="queued, started, completed, failed or crashed.")] = None,
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="Only this workflow's threads.")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """List threads, newest first.

    Example: nerve thread list --status started
    """
    not_available("thread list")


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Thread id, e.g. run-7.")],
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Show one thread: header, then one row per round.

    Example: nerve thread show run-7
    """
    not_available("thread show")
