"""Options and helpers every command module shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.errors import NerveError

HomeOption = Annotated[
    Optional[Path],
    typer.Option(
        "--home",
        help="Instance folder (default: $NERVE_HOME, else ~/.uncaged-nerve).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]


class NotAvailable(NerveError):
    """A command whose feature has not been built yet."""

    exit_code = 3


def not_available(command: str) -> None:
    raise NotAvailable(f"`nerve {command}` is not available yet in this version of Nerve.")
