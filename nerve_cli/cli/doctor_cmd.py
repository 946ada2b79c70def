
from typing import Annotated

import typer

from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption


def doctor(
    home: HomeOption = None,
    fix: Annotated[bool, typer.Option("--fix", help="Rewrite workflow_runs from the logs when they differ.")] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
) -> None:
    """Check derived state against the logs (workflow_runs is rebuilt from logs, archived days included).

    Exits 1 when differences remain (none after a successful --fix). --fix is
    refused while an engine runs.

    Example: nerve doctor --fix
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.workflows.rebuild import doctor as check

    json_ = output.use_format(format_, json_) == "json"
    report = check(require_instance(home), fix=fix)
    if json_:
        from nerve_cli.contract.threads import doctor as doctor_document

        output.print_json(doctor_document(report))
        if report.differences and not report.fixed:
            raise typer.Exit(1)
        return
    if not report.differences:
        output.info(f"workflow_runs matches the logs ({report.runs} threads)", style="green")
        return
    rows = [(d.run_id, d.field, d.table, d.logs) for d in report.differences]
    output.show(output.table("workflow_runs differs from the logs", ["thread", "field", "workflow_runs", "logs"], rows))
    if report.fixed:
        output.info(f"rewrote workflow_runs from the logs ({report.runs} threads)", style="green")
        return
    output.warn("run `nerve doctor --fix` (with the engine stopped) to rebuild workflow_runs from the logs")
    raise typer.Exit(1)
