from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption


def logs(
    home: HomeOption = None,
    source: Annotated[Optional[str], typer.Option("--source", help="reflex, workflow, system or signal.")] = None,
    type_: Annotated[Optional[str], typer.Option("--type", help="Log type, e.g. error, run_complete.")] = None,
    ref: Annotated[Optional[str], typer.Option("--ref", help="Sense name or thread id (run-7).")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only rows newer than this (1h, 7d, or a UTC date 2026-08-01); reaches into the archive when needed.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many rows (newest).")] = 50,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new rows as they arrive (Ctrl-C stops).")] = False,
    json_: JsonOption = False,
) -> None:
    """Show the engine's log, newest last (reads data/logs.db directly; no engine needed).

    --json prints one JSON object per line (pipe it into jq).

    Example: nerve logs --source system --type error --since 1h
    """
    from nerve_cli.cli import logs_view
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.store.history import follow_logs, parse_since, read_logs
    from nerve_cli.store.logs import query_logs

    layout = Layout(require_instance(home))
    filters = {"source": source, "type": type_, "ref": ref}
    since_ms = parse_since(since) if since else None
    if not layout.logs_db.exists() and not follow and since_ms is None:
        logs_view.no_log(layout)
        return
    history = read_logs(layout.home, since_ms=since_ms, limit=limit, **filters)
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
        for batch in follow_logs(layout.logs_db, after, source=source, type=type_, ref=ref):
            show(batch, table=False)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
