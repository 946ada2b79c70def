
from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, UtcOption


def status(home: HomeOption = None, json_: JsonOption = False, format_: FormatOption = None,
           _utc: UtcOption = False) -> None:
    """Show the running engine: uptime, workers, and each sense's schedule.

    Exit code 0 when an engine answers, 1 when none runs (with --json, an
    error document on stdout). `runs` and `errors` count since the engine started.

    Example: nerve status --json
    """
    from nerve_cli.cli import output
    from nerve_cli.cli.render_status import render_status
    from nerve_cli.contract.engine import status as status_document
    from nerve_cli.home import require_instance
    from nerve_cli.ops.client import request

    fmt = output.use_format(format_, json_)
    doc = status_document(request(require_instance(home), "status"))
    if fmt == "json":
        output.print_json(doc)
    else:
        render_status(doc)
