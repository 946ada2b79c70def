"""`nerve service install|uninstall|status`: the OS supervisor keeps `nerve run` alive (logic in instance.service)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.cli import choices
from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.cli.group import HelpGroup

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Keep the engine running under systemd (Linux) or launchd (macOS).\n\n"
         "Example: nerve service install --dry-run && nerve service install && nerve service status",
)
Platform = Annotated[Optional[choices.Platform], typer.Option("--platform", help="linux (systemd user unit) or macos (launchd agent); default: this machine.")]


@app.command("install")
def install(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the unit only; write and start nothing.")] = False,
    env: Annotated[Optional[list[str]], typer.Option(
        "--env", metavar="NAME[=VALUE]", help="Give the engine this variable (API keys, LLM_USER_PATH): NAME "
        "alone takes its value here, now. Repeat for more. Kept in a private file (0600), not in the unit.")] = None,
    env_file: Annotated[Optional[list[Path]], typer.Option(
        "--env-file", metavar="FILE", help="A file of NAME=VALUE lines the engine's environment gets (systemd reads it at each "
        "start; launchd copies it in now). Repeat for more.")] = None,
    metrics: Annotated[Optional[str], typer.Option(
        "--metrics", metavar="HOST:PORT", help="Run the engine with --metrics HOST:PORT (engine.metrics in "
        "nerve.yaml does the same without it).")] = None,
    platform: Platform = None,
    home: HomeOption = None,
) -> None:
    """Write and enable a unit that runs `nerve run` for this instance and restarts it on failure.

    Linux: a systemd user unit in ~/.config/systemd/user/, enabled and started
    with `systemctl --user enable --now` (add `loginctl enable-linger $USER` to
    keep it running while you are logged out). macOS: a launchd agent in
    ~/Library/LaunchAgents/, loaded with `launchctl bootstrap`. Prints what it
    wrote. --dry-run prints the unit only.

    A service starts with the supervisor's environment, not your shell's: give
    it the API keys and the llm folder its model-backed roles need with --env
    (values go to ~/.config/nerve/UNIT.env, mode 0600) or --env-file.

    Example: nerve service install --env OPENAI_API_KEY --env LLM_USER_PATH=~/llm --metrics 127.0.0.1:9464
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.service import environment
    from nerve_cli.instance.service import install as run

    root = require_instance(home)
    given = environment(env or [], env_file or [])
    unit = _unit(root, platform, given, _metrics(metrics))
    if dry_run:
        import sys

        sys.stdout.write(unit.text)
        return
    state = run(root, unit)
    state.engine = _engine(root)
    output.info(f"wrote {unit.path}:", style="bold")
    output.info(unit.text.rstrip())
    if unit.env_path is not None:
        output.info(f"wrote {unit.env_path} (mode 0600): {', '.join(given.names)}", style="bold")
    for argv in state.commands:
        output.info(f"ran: {' '.join(argv)}", style="dim")
    _render(state)
    _hint_llm(given)


@app.command("uninstall")
def uninstall(platform: Platform = None, home: HomeOption = None) -> None:
    """Stop and disable this instance's unit and remove its file.

    When the supervisor cannot do it (no systemd user session, say), it says
    why, keeps the file and exits 1.

    Example: nerve service uninstall
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.service import uninstall as run

    root = require_instance(home)
    state = run(root, _unit(root, platform))
    for argv in state.commands:
        output.info(f"ran: {' '.join(argv)}", style="dim")
    output.info(f"removed {state.unit.path}", style="green")


@app.command("status")
def status(platform: Platform = None, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Whether a unit is installed for this instance, enabled, active, and whether the engine answers.

    Exits 1 when the supervisor cannot say (no systemd user session, say), after printing why.

    Example: nerve service status --json
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.service import status as run

    root = require_instance(home)
    state = run(root, _unit(root, platform))
    state.engine = _engine(root)
    if json_:
        from nerve_cli.contract.instance import service as document

        output.print_json(document(state))
    else:
        _render(state)
    if state.problem:
        raise typer.Exit(1)


def _engine(root) -> bool:
    from nerve_cli.ops.client import engine_running

    return engine_running(root)


def _unit(root, platform, env=None, metrics=None):
    from nerve_cli.config.load import load_config
    from nerve_cli.instance.service import Environment, unit_for

    return unit_for(root, choices.value(platform), stop_timeout=load_config(root).engine.shutdown_timeout,
                    env=env or Environment(), metrics=metrics)


def _metrics(text: str | None) -> str | None:
    if text is None:
        return None
    from nerve_cli.address import parse_address

    try:
        return str(parse_address(text))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metrics") from None


def _hint_llm(given) -> None:
    """Your shell points llm at a folder the service would not see: say so, with the option that passes it."""
    import os

    from nerve_cli.cli import output
    from nerve_cli.instance.service import read_env_file

    folder = os.environ.get("LLM_USER_PATH")
    passed = set(given.names).union(*(read_env_file(f) for f in given.files))
    if folder and "LLM_USER_PATH" not in passed:
        output.warn(f"your shell sets LLM_USER_PATH={folder}, the service does not: its model-backed roles use "
                    f"llm's default folder; `nerve service install --env LLM_USER_PATH` passes yours")


def _render(state) -> None:
    from nerve_cli.cli import output

    if not state.installed:
        output.info(f"no service installed for this instance ({state.unit.path} does not exist); "
                    "`nerve service install` adds one")
    else:
        output.info(f"{state.unit.name}: {state.enabled}, {state.active} ({state.unit.path})")
    if state.problem:
        output.error(f"cannot ask the supervisor: {state.problem}")
    engine = "an engine answers on this instance's socket" if state.engine else "no engine answers for this instance"
    output.info(engine, style="green" if state.engine else "yellow")
