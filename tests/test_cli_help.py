"""Every command has help text with an example, and the entry points start."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from nerve_cli.cli.app import app


def _walk(cmd, path: list[str]):
    yield path, cmd
    if hasattr(cmd, "commands"):  # typer vendors click, so duck-type groups
        for name, sub in cmd.commands.items():
            yield from _walk(sub, path + [name])


def test_every_command_and_group_has_help_with_an_example_and_whole_summaries() -> None:
    root = typer.main.get_command(app)
    runner = CliRunner()
    seen = 0
    for path, cmd in _walk(root, []):
        result = runner.invoke(app, path + ["--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
        assert result.exit_code == 0, (path, result.output)
        if path:  # the root's own help lists the groups; each of them shows an example
            assert "Example:" in result.output, f"`nerve {' '.join(path)} --help` has no example"
        usage = result.output.split("\n", 1)[0]
        # no placeholder-looking text: typer 0.29 writes a required argument `{name}` and a repeated value
        # `<list[str]>`; Nerve's help writes `NAME`, `[NAME]...` and the element's own type or metavar
        assert "{" not in usage and "<list[" not in result.output, f"`nerve {' '.join(path)} --help`:\n{result.output}"
        # each example on a line of its own, at any width (two in one paragraph are joined by the wrapping)
        widths = [runner.invoke(app, path + ["--help"], terminal_width=width).output for width in (60, 78, 100)]
        joined = [line for text in widths for line in text.splitlines() if "Example:" in line.strip()[1:]]
        assert not joined, f"`nerve {' '.join(path)} --help` runs examples together: {joined}"
        if hasattr(cmd, "commands"):
            commands = result.output.split("Commands:", 1)[-1]
            assert "..." not in commands, f"`nerve {' '.join(path)} --help` cuts a summary:\n{commands}"
        seen += 1
    assert seen > 20


def test_python_dash_m_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "nerve_cli", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for group in ("init", "run", "status", "config", "sense", "workflow", "thread", "logs", "emit", "archive", "mesh"):
        assert group in out.stdout


def test_a_command_ends_with_what_it_built_frozen_and_its_output_written(tmp_path) -> None:
    """The interpreter's teardown does not walk a finished command's objects for cycles (cli/entry.py): 15-20 ms
    of `nerve config check`. Its output, its exit code and its atexit hooks are all still there."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('FROZEN', gc.get_freeze_count() > 10_000, file=sys.stderr))\n"
             "from nerve_cli.cli.entry import main\n"
             "sys.argv = ['nerve', 'config', 'check', '--fast', '--home', sys.argv[1]]\n"
             "main()\n")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out.stderr  # not an instance: the command's own exit code
    assert "FROZEN True" in out.stderr, out.stderr[-500:]
    assert "nerve.yaml" in out.stdout + out.stderr


def test_help_imports_no_viewing_library() -> None:
    """textual, plotext, prometheus_client, datasette and uvloop load only in the commands that use them."""
    probe = ("import sys\nfrom nerve_cli.cli.app import main\nsys.argv = ['nerve', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "heavy = ('textual', 'plotext', 'prometheus_client', 'datasette', 'uvloop')\n"
             "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout, out.stdout[-500:]


def test_each_command_is_listed_by_its_own_summary() -> None:
    """The root lists its commands without importing them: COMMANDS carries each summary, kept equal here."""
    from nerve_cli.cli.app import COMMANDS
    from nerve_cli.cli.group import SUMMARY_LIMIT

    root = typer.main.get_command(app)
    assert root.list_commands(None) == list(COMMANDS)
    for name, lazy in COMMANDS.items():
        own = root.get_command(None, name).get_short_help_str(SUMMARY_LIMIT)
        assert lazy.summary == own, f"COMMANDS[{name!r}] in nerve_cli/cli/app.py says {lazy.summary!r}; the command: {own!r}"


@pytest.mark.parametrize("argv, commands", [(["--help"], []), (["logs", "--help"], ["logs_cmd"]),
                                            (["sense", "list", "--help"], ["sense_cmd"])])
def test_a_command_line_imports_only_the_command_it_runs(argv: list[str], commands: list[str]) -> None:
    probe = ("import sys\nfrom nerve_cli.cli.app import main\n"
             f"sys.argv = ['nerve', *{argv!r}]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('LOADED', sorted(m.split('.')[2] for m in sys.modules if m.startswith('nerve_cli.cli.')"
             " and m.endswith('_cmd')))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert f"LOADED {commands!r}" in out.stdout, out.stdout[-500:]
