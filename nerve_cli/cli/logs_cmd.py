from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, not_available


def logs(
    home: HomeOption = None,
    source: Annotated[Optional[str], typer.Option("--source", help="reflex, workflow or system.")] = None,
    type_: Annotated[Optional[str], typer.Option("--type", help="Log type, e.g. error, run_complete.")] = None,
    ref: Annotated[Optional[str], typer.Option("--ref", help="Sense name or thread id (run-7).")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only rows newer than this (e.g. 1h, 7d).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many rows (newest).")] = 50,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new rows as they arrive.")] = False,
    json_: JsonOption = False,
) -> None:
    """Show the engine's log, newest last.

    Example: nerve logs --source system --type error --since 1h
    """
    not_available("logs")
