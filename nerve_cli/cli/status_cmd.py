import typer

from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, UtcOption

STOPPED = 3  # the exit code of `nerve status` when no engine runs (as `systemctl status` says "not running")


def status(home: HomeOption = None, json_: JsonOption = False, format_: FormatOption = None,
           _utc: UtcOption = False) -> None:
    """Show the running engine: uptime, workers, and each sense's schedule.

    Exit code 0 when an engine answers. With none running it shows the
    instance as its files tell it (each sense stopped, disabled or quarantined,
    when it last ran, the errors the log holds; threads waiting or queued) and
    exits 3, the way `systemctl status` says "not running"; --json prints the
    same `status` document with engine.running false. `runs` and `errors` count
    since the engine started (stopped: `errors` counts the whole log).

    Example: nerve status --json
    """
    from nerve_cli.cli import output
    from nerve_cli.cli.render_status import render_status
    from nerve_cli.contract.engine import status as status_document
    from nerve_cli.errors import EngineNotRunning
    from nerve_cli.home import require_instance
    from nerve_cli.ops.client import request

    fmt = output.use_format(format_, json_)
    path = require_instance(home)
    try:
        answer = request(path, "status")
    except EngineNotRunning:
        from nerve_cli.ops.stopped import stopped_answer

        answer = stopped_answer(path)
    doc = status_document(answer)
    if fmt == "json":
        output.print_json(doc)
    else:
        render_status(doc)
    if not doc["engine"]["running"]:
        raise typer.Exit(STOPPED)
