from __future__ import annotations

from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, not_available


def mesh(
    home: HomeOption = None,
    format_: Annotated[str, typer.Option("--format", help="tree, mermaid or dot.")] = "tree",
) -> None:
    """Draw the reflex mesh: senses, channels, workflows and what triggers what.

    Example: nerve mesh --format mermaid
    """
    not_available("mesh")
