from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, not_available


def migrate(
    name: Annotated[Optional[str], typer.Argument(help="Sense name (or use --all).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every sense in the instance.")] = False,
    allow_data_loss: Annotated[bool, typer.Option("--allow-data-loss", help="Write a migration that drops tables or columns.")] = False,
    home: HomeOption = None,
) -> None:
    """Generate the next SQL migration from the sense's schema.py.

    Example: nerve sense migrate cpu-usage
    """
    not_available("sense migrate")
