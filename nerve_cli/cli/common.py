"""Options every command module shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

HomeOption = Annotated[
    Optional[Path],
    typer.Option(
        "--home",
        help="Instance folder (default: $NERVE_HOME, else ~/.uncaged-nerve).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
