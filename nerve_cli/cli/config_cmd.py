
from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.cli.group import HelpGroup

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Check nerve.yaml.\n\nExample: nerve config check --json",
)


@app.command("check")
def check(
    home: HomeOption = None,
    json_: JsonOption = False,
    fast: Annotated[bool, typer.Option("--fast", help="Skip importing the senses and workflows (nerve.yaml and the folder only).")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Import the code again even if nothing it depends on changed since the last check.")] = False,
) -> None:
    """Validate nerve.yaml, cross-check it against the folder, and import the code.

    Lists every problem at once as `nerve.yaml:LINE: key.path: message`, then
    the external channels (`on:` names that are not senses) and what each `on:` pattern (`pr.*`, `ci.>`) matches
    today (channels nerve.yaml names, and ones data/events.db has seen; one matching nothing is warned about). Then imports each
    enabled sense and workflow in a child process (never in this one) and
    reports, as `senses/x/sense.py:LINE: ...`, what would fail to load: syntax
    and import errors, a missing or unusable compute, a missing `workflow`, an
    async moderator, a schema.py its migrations disagree with, and every problem
    of each workflow definition (as `nerve workflow check`). --fast skips the
    import. The import's answer is kept (in ~/.cache/nerve) and used again while
    no file of the instance (nerve.yaml aside), of Nerve or of the installed
    packages, nor the Python or the environment, changed; --no-cache imports
    again. Exits 0 when valid (warnings allowed), 1 when not. Never modifies a
    file of the instance. With --json prints {"version", "valid", "problems": [{path, message,
    severity, line, file}], "channels": [{name, reflexes, did_you_mean}], "counts", "patterns": [{pattern, reflexes, declared, seen, senses}]}.

    Example: nerve config check --json
    """
    from nerve_cli.config.code import early_check
    from nerve_cli.home import require_instance

    where = require_instance(home)
    # the code check's child starts first: its start-up overlaps the validation's imports and work below
    early = None if fast else early_check(where, cache=not no_cache)
    from nerve_cli.cli import output
    from nerve_cli.config.check import check_instance

    report = check_instance(where, code=not fast, early=early)
    if json_:
        from nerve_cli.contract.instance import config_check

        output.print_json(config_check(report))
    else:
        _render(report)
    if not report.valid:
        raise typer.Exit(1)


def _render(report) -> None:
    from nerve_cli.cli import output

    for item in report.problems:
        output.problem(item)
    fed = {"emit": "External channels (fed by `nerve emit NAME`, not by a sense):",
           "fleet": "Fleet sources (fed by other hosts, `fleet.subscribe`):"}
    for by, heading in fed.items():
        channels = [c for c in report.channels if c.fed_by == by]
        if channels:
            output.info(heading)
        for channel in channels:
            used = ", ".join(f"reflexes[{i}]" for i in channel.reflexes)
            near = f"  did you mean sense `{channel.did_you_mean}`?" if channel.did_you_mean else ""
            output.info(f"  {channel.name}  (on: of {used}){near}")
    if report.patterns:
        output.info("Patterns (the channels each matches today):")
    for pattern in report.patterns:
        used = ", ".join(f"reflexes[{i}]" for i in pattern.reflexes)
        names = [*pattern.declared, *(f"{n} (seen)" for n in pattern.seen)]
        output.info(f"  {pattern.pattern}  (on: of {used}) → {', '.join(names) if names else 'nothing yet'}")
    output.info(report.verdict(), style="bold green" if report.valid else "bold red")
