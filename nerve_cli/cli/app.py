"""The `nerve` command: a thin Typer layer over the library.

Only typer is imported at module level; each command imports what it needs
inside its body so `nerve --help` and shell completion stay fast. The command
modules do without `from __future__ import annotations`: Typer reads every
command's annotations to build the CLI (for --help too), and a string
annotation costs an eval each time (≈ 20 ms over all commands).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli import (
    archive_cmd,
    config_cmd,
    data_cmd,
    deps_cmd,
    doctor_cmd,
    emit_cmd,
    gc_cmd,
    init_cmd,
    logs_cmd,
    mcp_cmd,
    mesh_cmd,
    run_cmd,
    sense_cmd,
    service_cmd,
    status_cmd,
    thread_cmd,
    top_cmd,
    workflow_cmd,
)
from nerve_cli.cli.group import NerveGroup

app = typer.Typer(
    cls=NerveGroup,
    name="nerve",
    help="Nerve: a local observation engine for AI agents.\n\n"
    "Example: nerve init && nerve config check && nerve run",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from nerve_cli import __version__

        typer.echo(f"nerve {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Nerve: a local observation engine for AI agents."""


app.command("init")(init_cmd.init)
app.command("run")(run_cmd.run)
app.command("status")(status_cmd.status)
app.command("top")(top_cmd.top)
app.command("emit")(emit_cmd.emit)
app.command("logs")(logs_cmd.logs)
app.command("archive")(archive_cmd.archive)
app.command("mesh")(mesh_cmd.mesh)
app.command("doctor")(doctor_cmd.doctor)
app.command("mcp")(mcp_cmd.mcp)
app.command("backup")(data_cmd.backup)
app.command("datasette", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    data_cmd.datasette)
app.command("gc")(gc_cmd.gc)
app.add_typer(config_cmd.app, name="config")
app.add_typer(sense_cmd.app, name="sense")
app.add_typer(workflow_cmd.app, name="workflow")
app.add_typer(thread_cmd.app, name="thread")
app.add_typer(service_cmd.app, name="service")
app.add_typer(deps_cmd.app, name="deps")


def main() -> None:
    from nerve_cli.cli.pipes import quiet_when_stdout_closes

    with quiet_when_stdout_closes():  # what is still buffered meets a closed stdout at the last flush
        app()
