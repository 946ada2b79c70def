"""`nerve deps [install]`: requirements.txt against the environment the workers use (logic in instance.deps)."""

from __future__ import annotations

import typer

from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.cli.group import HelpGroup

app = typer.Typer(cls=HelpGroup)  # `nerve deps` itself checks: its help is the callback's docstring


@app.callback(invoke_without_command=True)
def deps(ctx: typer.Context, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Check that requirements.txt is satisfied where the workers run; list what is missing.

    Workers run with the interpreter that runs Nerve, so that environment is
    checked. Exit 1 when something is missing or at the wrong version.

    Example: nerve deps && nerve deps install
    """
    if ctx.invoked_subcommand is not None:
        return
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.deps import check

    root = require_instance(home)
    found = check(root)
    if json_:
        from nerve_cli.contract.instance import deps as document

        output.print_json(document(_python(), found))
    else:
        _render(found)
    if not all(r.ok for r in found):
        raise typer.Exit(1)


@app.command("install")
def install(home: HomeOption = None) -> None:
    """Install requirements.txt into the environment the workers use (its pip), then check it.

    Example: nerve deps install
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.instance.deps import check
    from nerve_cli.instance.deps import install as run

    root = require_instance(home)
    output.info(f"pip install -r requirements.txt for {_python()}", style="dim")
    done = run(root)
    if done.returncode != 0:
        output.error(f"pip failed (exit {done.returncode}); see its output above")
        raise typer.Exit(1)
    found = check(root)
    _render(found)
    if not all(r.ok for r in found):
        raise typer.Exit(1)


def _python() -> str:
    import sys

    return sys.executable


def _render(found) -> None:
    from nerve_cli.cli import output

    if not found:
        output.info("requirements.txt lists nothing (or does not exist): nothing to check")
        return
    rows = [(r.name or r.text, r.wanted or "any", r.installed or "-", r.state) for r in found]
    output.show(output.table(f"requirements.txt for {_python()}", ["package", "wanted", "installed", "state"], rows))
    bad = [r for r in found if not r.ok]
    if bad:
        output.warn(f"{len(bad)} of {len(found)} not satisfied: {', '.join(r.text for r in bad)}; "
                    "run `nerve deps install`")
    else:
        output.info("every requirement is satisfied", style="green")
