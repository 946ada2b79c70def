
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.choices import LogSource, value
from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, SinceOption, UntilOption, UtcOption, window


def logs(
    home: HomeOption = None,
    source: Annotated[Optional[LogSource], typer.Option("--source", help="What wrote the row.", case_sensitive=False)] = None,
    type_: Annotated[Optional[str], typer.Option("--type", help="Log type, e.g. error, run_complete, print.")] = None,
    ref: Annotated[Optional[str], typer.Option("--ref", help="Sense name or thread id (run-7).", autocompletion=complete.refs)] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many rows (newest).")] = 50,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new rows as they arrive (Ctrl-C stops).")] = False,
    signals: Annotated[bool, typer.Option("--signals", help="Show signals with their payloads (from each sense's database; --ref picks one sense).")] = False,
    prints: Annotated[bool, typer.Option("--prints", help="Show what computes printed, one row per line.")] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
    _utc: UtcOption = False,
) -> None:
    """Show the engine's log, newest last (reads data/logs.db directly; no engine needed).

    Archived days are read too when --since reaches them. --signals and
    --prints show those instead of the log's other rows (both: interleaved in
    time), e.g. `nerve logs --ref cpu-usage --signals --prints`. --json prints
    one JSON document per line (pipe it into jq); in a pipe the table is
    tab-separated lines with whole payloads as JSON. Neither cuts a payload short.

    Example: nerve logs --source system --type error --since 1h30m
    """
    from nerve_cli.cli import logs_view, output
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.store import feed
    from nerve_cli.store.history import LogHistory, read_logs
    from nerve_cli.store.logs import query_logs

    json_ = output.use_format(format_, json_) == "json"
    logs_view.start()
    layout = Layout(require_instance(home))
    if type_ == "print":  # the table shows a compute's printed lines as `print`: the name finds them too
        type_ = feed.PRINTS
    if prints:
        if type_ not in (None, feed.PRINTS):
            raise typer.BadParameter(f"--prints shows rows of type {feed.PRINTS}; drop --type {type_}", param_hint="--type")
        type_ = feed.PRINTS
    filters = {"source": value(source), "type": type_, "ref": ref}
    senses = ([ref] if ref else feed.senses_with_signals(layout.home)) if signals else None
    with_log = prints or not signals  # --signals alone: the log's own rows are not asked for
    since_ms, until_ms = window(since, until)
    if follow and until_ms is not None:
        raise typer.BadParameter("--until cannot be combined with --follow", param_hint="--until")
    if not layout.logs_db.exists() and not follow and since_ms is None and not signals:
        logs_view.no_log(layout)
        return
    history = (read_logs(layout.home, since_ms=since_ms, until_ms=until_ms, limit=limit, **filters) if with_log
               else LogHistory([]))
    logs_view.archived_note(layout, history)
    sent = feed.signal_rows(layout.home, senses, since_ms, limit, until_ms=until_ms) if senses else []
    rows = feed.merge(history.rows, sent, limit=limit)
    show = logs_view.print_jsonl if json_ else logs_view.print_rows
    if not rows and not follow:
        if not layout.logs_db.exists() and not history.archived_days and not signals:
            logs_view.no_log(layout)
        elif not json_:
            logs_view.nothing()
        return
    if not follow:
        show(rows, table=True)
        return
    show(rows, table=False)
    last = query_logs(layout.logs_db, limit=1) if layout.logs_db.exists() else []
    after = max([r["id"] for r in last + history.rows] or [0])
    try:
        for batch in feed.follow(layout.home, log_filters=filters if with_log else None, senses=senses,
                                 after_log_id=after):
            show(batch, table=False)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
