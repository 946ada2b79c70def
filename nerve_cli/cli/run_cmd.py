from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, not_available


def run(
    home: HomeOption = None,
    for_: Annotated[Optional[str], typer.Option("--for", help="Stop by itself after this long (e.g. 30s).")] = None,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="Also show signals (-v) and computes (-vv).")] = 0,
) -> None:
    """Run the engine in the foreground until Ctrl-C (or --for).

    Example: nerve run --for 1m -v
    """
    not_available("run")
