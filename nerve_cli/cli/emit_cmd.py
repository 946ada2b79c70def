from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, not_available


def emit(
    channel: Annotated[str, typer.Argument(help="External channel name, as used in a reflex's on: list.")],
    payload: Annotated[Optional[str], typer.Option("--payload", help="JSON payload to send with the signal.")] = None,
    home: HomeOption = None,
) -> None:
    """Send a signal on an external channel to the running engine.

    Example: nerve emit task.created --payload '{"id": 7}'
    """
    not_available("emit")
