from __future__ import annotations

from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, not_available


def doctor(
    home: HomeOption = None,
    fix: Annotated[bool, typer.Option("--fix", help="Rewrite workflow_runs from the logs when they differ.")] = False,
) -> None:
    """Check derived state against the logs (workflow_runs is rebuilt from logs).

    Example: nerve doctor --fix
    """
    not_available("doctor")
