from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption

app = typer.Typer(help="Inspect workflow threads.", no_args_is_help=True)


@app.command("list")
def list_(
    status: Annotated[Optional[str], typer.Option("--status", help="queued, started, completed, failed, crashed or dropped.")] = None,
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="Only this workflow's threads.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many threads (newest).")] = 50,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """List threads, newest first.

    Example: nerve thread list --status started
    """
    from nerve_cli.cli import output, thread_view
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.workflows.threads import list_threads

    runs = list_threads(Layout(require_instance(home)).logs_db, status=status, workflow=workflow, limit=limit)
    if json_:
        output.print_json(runs)
    elif not runs:
        output.info("no threads" + (" match" if status or workflow else " yet"))
    else:
        output.show(thread_view.threads_table(runs))


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Thread id, e.g. run-7 (or just 7).")],
    transcript: Annotated[bool, typer.Option("--transcript", help="Print the rounds as a conversation "
                                             "(role, time, content, meta folded) instead of a table.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Show one thread: header, then one row per round (the start message is not a round).

    Example: nerve thread show run-7 --transcript | less
    """
    from nerve_cli.cli import output, thread_view
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.workflows.threads import thread_detail

    detail = thread_detail(Layout(require_instance(home)).logs_db, run_id)
    if json_:
        output.print_json(detail)
        return
    if transcript:
        thread_view.transcript(detail)
        return
    thread_view.thread_header(detail)
    thread_view.thread_rounds(detail)
