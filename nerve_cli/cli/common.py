"""Options every command module shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.choices import Format
from nerve_cli.clock import now_ms


def _set_utc(value: bool) -> bool:
    # eager, so it is known before --since/--until are read (a bare date is read in the zone times are shown in)
    from nerve_cli.cli import output

    output.set_utc(bool(value))
    return value


HomeOption = Annotated[
    Optional[Path],
    typer.Option(
        "--home",
        help="Instance folder (default: $NERVE_HOME, else ~/.uncaged-nerve).",
        show_default=False,
    ),
]
SenseName = Annotated[str, typer.Argument(help="Sense name.", autocompletion=complete.senses, show_default=False)]
WorkflowName = Annotated[str, typer.Argument(help="Workflow name.", autocompletion=complete.workflows,
                                             show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
FormatOption = Annotated[
    Optional[Format],
    typer.Option("--format", case_sensitive=False, show_default=False,
                 help="table, tsv, csv or json (default: a table on a terminal, tab-separated lines in a pipe)."),
]
UtcOption = Annotated[
    bool,
    typer.Option(
        "--utc", envvar="NERVE_UTC", is_eager=True, callback=_set_utc, expose_value=False,
        help="Show times in UTC instead of local time (both are labelled with their zone).",
    ),
]
WHEN_HELP = "a duration ago (90s, 1h30m, 2d, 1w), a date (2026-08-01), an ISO time or epoch seconds"
SinceOption = Annotated[Optional[str], typer.Option("--since", help=f"Only rows at or after this: {WHEN_HELP}.")]
UntilOption = Annotated[Optional[str], typer.Option("--until", help=f"Only rows before this: {WHEN_HELP}.")]


def instant(text: str | None, option: str) -> int | None:
    """A typed `--since`/`--until` value → unix ms; a bad one is a usage error (exit 2) naming the option."""
    if text is None:
        return None

    from nerve_cli.cli import output
    from nerve_cli.contract.times import parse_instant

    try:
        return parse_instant(text, now_ms=now_ms(), utc=output.utc())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def window(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """`--since`/`--until` → unix ms; an `--until` not after `--since` is a usage error, not an empty answer."""
    since_ms, until_ms = instant(since, "--since"), instant(until, "--until")
    if since_ms is not None and until_ms is not None and until_ms <= since_ms:
        raise typer.BadParameter(f"{until!r} is not after --since {since!r}: the window would be empty",
                                 param_hint="--until")
    return since_ms, until_ms
