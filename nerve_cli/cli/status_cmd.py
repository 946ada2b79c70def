from __future__ import annotations

from nerve_cli.cli.common import HomeOption, JsonOption


def status(home: HomeOption = None, json_: JsonOption = False) -> None:
    """Show the running engine: uptime, workers, and each sense's schedule.

    Exit code 0 when an engine answers, 1 when none runs.

    Example: nerve status --json
    """
    from nerve_cli.cli import output
    from nerve_cli.cli.render_status import render_status
    from nerve_cli.home import require_instance
    from nerve_cli.kernel.client import request

    answer = request(require_instance(home), "status")
    answer.pop("ok", None)
    if json_:
        output.print_json(answer)
    else:
        render_status(answer)
