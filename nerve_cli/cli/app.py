"""The `nerve` command: a thin Typer layer over the library.

Only typer is imported at module level. The commands are named here with
their summaries and imported only when used (cli/lazy.py); each imports what
it needs inside its body, so `nerve --help` and shell completion stay fast. The command
modules do without `from __future__ import annotations`: Typer reads every
command's annotations to build the CLI (for --help too), and a string
annotation costs an eval each time (≈ 20 ms over all commands).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli import fastparams
from nerve_cli.cli.group import NerveGroup
from nerve_cli.cli.lazy import Lazy, LazyCommands

fastparams.install()  # plain option values without pydantic (typer's adapters for everything else)

# name: where the command lives, and the line the root's --help lists for it (kept equal to the
# command's own by tests/test_cli_help.py); in the order --help lists them
COMMANDS = {
    "init": Lazy("init_cmd", "init", "Create a new instance folder: nerve.yaml, example senses, a git repo."),
    "run": Lazy("run_cmd", "run", "Run the engine in the foreground until Ctrl-C (or --for)."),
    "status": Lazy("status_cmd", "status", "Show the running engine: uptime, workers, and each sense's schedule."),
    "top": Lazy("top_cmd", "top", "A live dashboard: senses, workers, threads, signals and errors as they happen."),
    "emit": Lazy("emit_cmd", "emit",
                 "Send an event to an external channel; it is committed to disk before this returns."),
    "logs": Lazy("logs_cmd", "logs",
                 "Show the engine's log, newest last (reads data/logs.db directly; no engine needed)."),
    "archive": Lazy("archive_cmd", "archive", "Move old log and signal rows into daily JSONL files under data/archive/."),
    "mesh": Lazy("mesh_cmd", "mesh", "Draw the reflex mesh: senses, channels, workflows and what triggers what."),
    "doctor": Lazy("doctor_cmd", "doctor",
                   "Check derived state: the code against its migrations, workflow_runs against the logs."),
    "ui": Lazy("ui_cmd", "ui", "The web console: senses, threads, the inbox of what waits for a person, the log, the mesh; live."),
    "mcp": Lazy("mcp_cmd", "mcp", "Serve this instance to AI agents over the Model Context Protocol (stdio)."),
    "backup": Lazy("data_cmd", "backup", "Copy the whole instance safely, even while the engine runs."),
    "datasette": Lazy("data_cmd", "datasette", "Browse logs.db and every sense database in Datasette (live, "
                      "read-only, engine tables hidden).",
                      {"allow_extra_args": True, "ignore_unknown_options": True}),
    "gc": Lazy("gc_cmd", "gc", "Offline clean-up: remove old attic entries, data of deleted or disabled senses, unreferenced blobs."),
    "fleet": Lazy("fleet_cmd", "fleet", "Show this host in its fleet: the link to NATS, the outbox, and every host "
                  "heard from with its last event."),
    "config": Lazy("config_cmd", "app", "Check nerve.yaml."),
    "sense": Lazy("sense_cmd", "app", "Create, run and inspect senses."),
    "workflow": Lazy("workflow_cmd", "app", "Create, run and manage workflows."),
    "thread": Lazy("thread_cmd", "app", "Inspect workflow threads, answer the ones waiting for a person, cancel or run them again."),
    "service": Lazy("service_cmd", "app", "Keep the engine running under systemd (Linux) or launchd (macOS)."),
    "agent": Lazy("agent_cmd", "app", "Wake coding agents (Claude Code, OpenCode, Codex) with the events they hear, "
                  "exactly once."),
    "deps": Lazy("deps_cmd", "app", "Check that requirements.txt is satisfied where the workers run; list what is missing."),
}


class RootGroup(NerveGroup):
    """`nerve` itself: NerveGroup over COMMANDS, each built when first asked for."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.commands = LazyCommands(app, COMMANDS, self.commands)


app = typer.Typer(
    cls=RootGroup,
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


def main() -> None:
    from nerve_cli.cli.pipes import quiet_when_stdout_closes

    with quiet_when_stdout_closes():  # what is still buffered meets a closed stdout at the last flush
        app()
