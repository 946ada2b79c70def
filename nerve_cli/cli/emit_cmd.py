
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.common import HomeOption, JsonOption


def emit(
    channel: Annotated[str, typer.Argument(help="External channel name, as used in a reflex's on: list.",
                                         autocompletion=complete.channels)],
    payload: Annotated[Optional[str], typer.Option("--payload", help="JSON payload to send with the signal.")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Send a signal on an external channel to the running engine.

    Example: nerve emit task.created --payload '{"id": 7}'
    """
    import json

    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.kernel.client import request

    path = require_instance(home)
    value = None
    if payload is not None:
        try:
            value = json.loads(payload)
        except ValueError as exc:
            raise typer.BadParameter(f"not valid JSON: {exc}", param_hint="--payload") from None
    answer = request(path, "emit", channel=channel, payload=value)
    if json_:
        from nerve_cli.contract.engine import emit as emit_document

        output.print_json(emit_document(channel, answer["triggered"]))
    elif answer["triggered"]:
        output.info(f"emitted {channel}: triggered {', '.join(answer['triggered'])}")
    else:
        output.warn(f"emitted {channel}, but no enabled reflex listens to it (add it to a reflex's on: list)")
