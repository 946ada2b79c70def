"""`nerve datasette` and `nerve backup`: looking at the instance's data with other tools, copying it safely."""

import os
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, JsonOption


def datasette(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback unless you mean otherwise).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on.")] = 8001,
    home: HomeOption = None,
) -> None:
    """Browse logs.db and every sense database in Datasette (live, read-only, engine tables hidden).

    Adds readable views, labelled columns and canned queries (recent_errors,
    slowest_senses, threads_by_status). Options after `--` go to Datasette.
    Needs Datasette installed: `pip install datasette`.

    Example: nerve datasette --port 8001 -- --open
    """
    from nerve_cli.cli import output
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.instance.datasette import command

    argv = command(Layout(require_instance(home)), host, port, list(ctx.args))
    output.info(f"Datasette on http://{host}:{port}/ (Ctrl-C stops it)", style="bold")
    if os.name == "posix":
        os.execv(argv[0], argv)  # Datasette owns the terminal and Ctrl-C from here on
    raise typer.Exit(subprocess.call(argv))


def backup(
    dest: Annotated[Path, typer.Argument(help="A new folder to copy the instance into.")],
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Copy the whole instance safely, even while the engine runs.

    Each database is copied with VACUUM INTO (a consistent snapshot in one file,
    so no -wal file is needed to read it); config, code, git history, archived
    days and blobs are copied as they are.

    Example: nerve backup ~/backups/nerve-2026-08-01
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.backup import backup as run_backup
    from nerve_cli.words import plural

    report = run_backup(require_instance(home), dest)
    if json_:
        from nerve_cli.contract.instance import backup as backup_document

        output.print_json(backup_document(report))
        return
    output.info(f"Backed up to {report.dest}: {plural(len(report.databases), 'database')} and "
                f"{plural(report.files, 'other file')}, "
                f"{report.bytes / 1_048_576:.1f} MiB", style="bold green")
    for db in report.databases:
        output.info(f"  {db['path']}  {db['bytes'] / 1024:.0f} KiB")
