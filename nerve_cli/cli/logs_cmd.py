
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.choices import LogSource, value
from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, SinceOption, UntilOption, UtcOption, instant


def logs(
    home: HomeOption = None,
    source: Annotated[Optional[LogSource], typer.Option("--source", help="What wrote the row.", case_sensitive=False)] = None,
    type_: Annotated[Optional[str], typer.Option("--type", help="Log type, e.g. error, run_complete.")] = None,
    ref: Annotated[Optional[str], typer.Option("--ref", help="Sense name or thread id (run-7).", autocompletion=complete.refs)] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many rows (newest).")] = 50,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new rows as they arrive (Ctrl-C stops).")] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
    _utc: UtcOption = False,
) -> None:
    """Show the engine's log, newest last (reads data/logs.db directly; no engine needed).

    Archived days are read too when --since reaches them. --json prints one
    JSON document per line (pipe it into jq); in a pipe the table is
    tab-separated lines with whole payloads as JSON.

    Example: nerve logs --source system --type error --since 1h30m
    """
    from nerve_cli.cli import logs_view, output
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.store.history import follow_logs, read_logs
    from nerve_cli.store.logs import query_logs

    json_ = output.use_format(format_, json_) == "json"
    logs_view.start()
    layout = Layout(require_instance(home))
    filters = {"source": value(source), "type": type_, "ref": ref}
    since_ms, until_ms = instant(since, "--since"), instant(until, "--until")
    if follow and until_ms is not None:
        raise typer.BadParameter("--until cannot be combined with --follow", param_hint="--until")
    if not layout.logs_db.exists() and not follow and since_ms is None:
        logs_view.no_log(layout)
        return
    history = read_logs(layout.home, since_ms=since_ms, until_ms=until_ms, limit=limit, **filters)
    logs_view.archived_note(layout, history)
    show = logs_view.print_jsonl if json_ else logs_view.print_rows
    if not history.rows and not follow:
        if not layout.logs_db.exists() and not history.archived_days:
            logs_view.no_log(layout)
        elif not json_:
            logs_view.nothing()
        return
    if not follow:
        show(history.rows, table=True)
        return
    show(history.rows, table=False)
    last = query_logs(layout.logs_db, limit=1)
    after = max([r["id"] for r in last + history.rows] or [0])
    try:
        for batch in follow_logs(layout.logs_db, after, **filters):
            show(batch, table=False)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
