"""The `nerve` command: a thin Typer layer over the library.

Only typer is imported at module level; each command imports what it needs
inside its body so `nerve --help` stays fast.
"""

from __future__ import annotations

import errno

import typer
from typer.core import TyperGroup

from nerve_cli.cli import (
    archive_cmd,
    config_cmd,
    data_cmd,
    doctor_cmd,
    emit_cmd,
    init_cmd,
    logs_cmd,
    mesh_cmd,
    run_cmd,
    sense_cmd,
    status_cmd,
    thread_cmd,
    top_cmd,
    workflow_cmd,
)
from nerve_cli.errors import NerveError

_REFUSED_WRITES = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


class NerveGroup(TyperGroup):
    """Turns a NerveError anywhere below into one red line and its exit code.

    So is a write the filesystem refused (read-only, full, not ours): the user's
    to fix, named by its file, never a traceback.
    """

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except NerveError as exc:
            from nerve_cli.cli import output

            output.error(str(exc))
            problems = getattr(exc, "problems", None)
            if problems:
                for problem in problems:
                    output.err_console().print(f"  {problem}", highlight=False, markup=False)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:
            if exc.errno not in _REFUSED_WRITES or not exc.filename:
                raise
            from nerve_cli.cli import output
            from nerve_cli.store.sqlitefile import storage_error

            output.error(str(storage_error(exc.filename, exc)))  # a read-only or full disk: the user's to fix
            raise typer.Exit(1) from None


app = typer.Typer(
    cls=NerveGroup,
    name="nerve",
    help="Nerve: a local observation engine for AI agents.\n\n"
    "Example: nerve init && nerve config check && nerve run",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.command("init")(init_cmd.init)
app.command("run")(run_cmd.run)
app.command("status")(status_cmd.status)
app.command("top")(top_cmd.top)
app.command("emit")(emit_cmd.emit)
app.command("logs")(logs_cmd.logs)
app.command("archive")(archive_cmd.archive)
app.command("mesh")(mesh_cmd.mesh)
app.command("doctor")(doctor_cmd.doctor)
app.command("backup")(data_cmd.backup)
app.command("datasette", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    data_cmd.datasette)
app.add_typer(config_cmd.app, name="config")
app.add_typer(sense_cmd.app, name="sense")
app.add_typer(workflow_cmd.app, name="workflow")
app.add_typer(thread_cmd.app, name="thread")


def main() -> None:
    app()
