from __future__ import annotations

from nerve_cli.cli.common import HomeOption, JsonOption, not_available


def status(home: HomeOption = None, json_: JsonOption = False) -> None:
    """Show the running engine: uptime, workers, and each sense's schedule.

    Example: nerve status --json
    """
    not_available("status")
