from __future__ import annotations

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, not_available

app = typer.Typer(help="Check nerve.yaml.", no_args_is_help=True)


@app.command("check")
def check(home: HomeOption = None, json_: JsonOption = False) -> None:
    """Validate nerve.yaml and cross-check it against the instance folder.

    Example: nerve config check --json
    """
    not_available("config check")
