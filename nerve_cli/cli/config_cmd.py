
import typer

from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.cli.group import HelpGroup

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Check nerve.yaml.\n\nExample: nerve config check --json",
)


@app.command("check")
def check(home: HomeOption = None, json_: JsonOption = False) -> None:
    """Validate nerve.yaml and cross-check it against the instance folder.

    Lists every problem at once as `nerve.yaml:LINE: key.path: message`, then
    the external channels (`on:` names that are not senses). Exits 0 when valid
    (warnings allowed), 1 when not. Never modifies the file. With --json prints
    {"version", "valid", "problems": [{path, message, severity, line}],
    "channels": [{name, reflexes, did_you_mean}], "counts"}.

    Example: nerve config check --json
    """
    from nerve_cli.cli import output
    from nerve_cli.config.check import check_instance
    from nerve_cli.home import require_instance

    report = check_instance(require_instance(home))
    if json_:
        from nerve_cli.contract.instance import config_check

        output.print_json(config_check(report))
    else:
        _render(report)
    if not report.valid:
        raise typer.Exit(1)


def _render(report) -> None:  # type: ignore[no-untyped-def]
    from nerve_cli.cli import output

    for item in report.problems:
        output.problem(item)
    if report.channels:
        output.info("External channels (fed by `nerve emit NAME`, not by a sense):")
        for channel in report.channels:
            used = ", ".join(f"reflexes[{i}]" for i in channel.reflexes)
            near = f"  did you mean sense `{channel.did_you_mean}`?" if channel.did_you_mean else ""
            output.info(f"  {channel.name}  (on: of {used}){near}")
    output.info(report.verdict(), style="bold green" if report.valid else "bold red")
