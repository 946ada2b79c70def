
from typing import Annotated

import typer

from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption


def doctor(
    home: HomeOption = None,
    fix: Annotated[bool, typer.Option("--fix", help="Rewrite workflow_runs from the logs when they differ.")] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
) -> None:
    """Check derived state: the code against its migrations, workflow_runs against the logs.

    Imports each enabled sense and workflow in a child process and reports what
    would fail to load (schema.py out of step with its migrations, with the
    `nerve sense migrate` to run; syntax and import errors). Then compares
    workflow_runs with what the logs say, archived days included (--fix
    rewrites it; refused while an engine runs), warns about log rows of a
    kind outside the log's vocabulary, and checks every database under data/
    (read-only: empty, not SQLite, pages that do not read). Exits 1 when a
    problem remains.

    Example: nerve doctor --fix
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.rebuild import doctor as check
    from nerve_cli.ops.workflows.runner import llm_environments

    json_ = output.use_format(format_, json_) == "json"
    root = require_instance(home)
    problems, skipped = _code_problems(root)
    report = check(root, fix=fix)
    models = llm_environments(root)
    failed = bool(problems or skipped or report.damaged) or bool(report.differences and not report.fixed)
    if json_:
        from nerve_cli.contract.threads import doctor as doctor_document

        output.print_json(doctor_document(report, problems, models))
    else:
        _render_code(problems, skipped)
        _render_runs(report)
        _render_models(models)
    if failed:
        raise typer.Exit(1)


def _code_problems(root) -> tuple[list, str | None]:
    """What would not load (found in a child process), or why the code could not be checked."""
    from nerve_cli.config.check import code_problems
    from nerve_cli.config.load import load_config
    from nerve_cli.errors import NerveError

    try:
        config = load_config(root)
    except NerveError as exc:
        return [], str(exc)
    return code_problems(root, config), None


def _render_code(problems: list, skipped: str | None) -> None:
    from nerve_cli.cli import output

    if skipped:
        output.warn(f"the code was not checked: {skipped}")
    for item in problems:
        output.problem(item)
    if not problems and not skipped:
        output.info("senses and workflows load; every schema.py matches its migrations", style="green")


def _render_runs(report) -> None:
    from nerve_cli.cli import output
    from nerve_cli.words import plural

    for _path, problem in report.damaged:
        output.error(problem)
    if not report.damaged:
        output.info("every database under data/ reads whole", style="green")

    for u in report.unknown:
        output.warn(f"logs.db holds {plural(u.rows, 'row')} of source {u.source}, type {u.type}: no kind of the log's "
                    "vocabulary (docs/reference/log.md); another version of Nerve or a hand wrote them "
                    f"(`nerve logs --source {u.source} --type {u.type}` shows them)")

    if not report.differences:
        output.info(f"workflow_runs matches the logs ({plural(report.runs, 'thread')})", style="green")
        return
    rows = [(d.run_id, d.field, d.table, d.logs) for d in report.differences]
    output.show(output.table("workflow_runs differs from the logs", ["thread", "field", "workflow_runs", "logs"], rows))
    if report.fixed:
        output.info(f"rewrote workflow_runs from the logs ({plural(report.runs, 'thread')})", style="green")
        return
    output.warn("run `nerve doctor --fix` (with the engine stopped) to rebuild workflow_runs from the logs")


def _render_models(models) -> None:
    from nerve_cli.cli import output
    from nerve_cli.roles.llm_env import mismatch

    here, engine = models
    if engine is None:
        output.info(f"models: {here.describe()} (an engine started here would use it)", style="dim")
        return
    differs = mismatch(engine, here)
    if differs:
        output.warn(differs)
    else:
        output.info(f"models: the engine and this shell use {engine.describe()}", style="dim")
