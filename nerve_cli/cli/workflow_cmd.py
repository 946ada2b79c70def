
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete, sense_remove, workflow_lifecycle
from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, WorkflowName
from nerve_cli.cli.group import HelpGroup
from nerve_cli.vocab.states import ThreadStatus

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Create, run and manage workflows.\n\nExample: nerve workflow new triage && nerve workflow run triage --prompt \"disk full\"",
)
Name = WorkflowName

# `nerve workflow run` exit codes
EXIT_FAILED, EXIT_DROPPED, EXIT_WAITING, EXIT_INTERRUPTED = 1, 4, 5, 130


@app.command("new")
def new(
    name: Annotated[str, typer.Argument(help="Name of the new workflow.")],
    llm: Annotated[bool, typer.Option("--llm", help="Model-backed roles (a writer and a critic) through llm.")] = False,
    model: Annotated[Optional[str], typer.Option("--model", help="With --llm: the llm model id or alias, written "
                                                 "as workflows.NAME.model (default: llm's default model).")] = None,
    home: HomeOption = None,
) -> None:
    """Scaffold a workflow with two roles and a moderator, register and commit it.

    Writes workflows/NAME.py (an author and a reviewer taking turns until the
    reviewer approves), adds `NAME: {concurrency: 1, overflow: queue}` under
    `workflows:` in nerve.yaml (comments kept) and commits both. With --llm the
    roles are a model-backed writer and critic (ending when the critic answers
    APPROVED), using workflows.NAME.model, else llm's default model.

    Example: nerve workflow new release-notes --llm --model gpt-4o-mini
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.scaffold import new_workflow

    made = new_workflow(require_instance(home), name, llm=llm, model=model)
    output.info(f"created workflows/{made.name}.py and registered it in nerve.yaml", style="green")
    output.notes(made.notes)
    if made.sha:
        output.info(f"committed {made.sha[:8]}: nerve: workflow new {made.name}", style="dim")
    if llm:
        which = (f"model {model} (workflows.{made.name}.model)" if model else
                 f"llm's default model (`llm models default`; or set workflows.{made.name}.model in nerve.yaml)")
        output.info(f"its roles use {which}")
    output.info(f'try it: nerve workflow run {made.name} --prompt "the release notes"')


@app.command("list")
def list_(home: HomeOption = None, json_: JsonOption = False, format_: FormatOption = None) -> None:
    """List workflows with their config and thread counts by status.

    Example: nerve workflow list
    """
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import workflow_list
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.threads import workflows_overview

    json_ = output.use_format(format_, json_) == "json"
    doc = workflow_list(workflows_overview(require_instance(home)))
    if json_:
        output.print_json(doc)
        return
    if not doc["workflows"]:
        output.info("no workflows yet; create one with `nerve workflow new NAME`")
        return
    table_rows = []
    for w in doc["workflows"]:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(w["threads"].items())) or "none"
        if w["removed"]:
            table_rows.append([w["name"], "(removed from nerve.yaml)", "", "", "", counts])
            continue
        c = w["config"]
        name = w["name"] if w["file_exists"] else f"{w['name']} ({w['file']} missing)"
        overflow = f"queue (max {c['max_queue']})" if c["overflow"] == "queue" else "drop"
        table_rows.append([name, "yes" if c["enabled"] else "no", c["concurrency"], overflow,
                           "yes" if c["idempotent"] else "no", counts])
    output.show(output.table(None, ["workflow", "enabled", "concurrency", "overflow", "idempotent", "threads"],
                             table_rows))


@app.command("check")
def check(
    name: Annotated[Optional[str], typer.Argument(help="One workflow (default: every one in nerve.yaml).",
                                                  autocompletion=complete.workflows)] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Check workflow definitions as a whole: every problem at once, each as FILE:LINE: message.

    What nerve.yaml says of each workflow, whether its definition file exists,
    then the definition itself, by the checker of its kind (a Python file is
    imported in a child process, never in this one): syntax and import errors,
    its shape (roles, reserved names, a plain moderator taking the messages),
    moderator choices that name no role (with the nearest one), tools the model
    is told nothing about, literal ask_person schemas that are not JSON Schemas
    and wait_for_event sources that look like a misspelt sense. `nerve config
    check` runs the same checks. Exits 0 when there is no error (warnings
    allowed), 1 when there is one. --json: {"version", "valid", "workflows":
    [{name, kind, file, errors, warnings}], "problems": [{path, message,
    severity, line, file}]}.

    Example: nerve workflow check triage
    """
    from nerve_cli.cli import output
    from nerve_cli.contract.threads import workflow_check
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.check import check_workflows

    report = check_workflows(require_instance(home), name)
    if json_:
        output.print_json(workflow_check(report))
    else:
        for problem in report.problems:
            output.problem(problem)
        output.info(report.verdict(), style="bold green" if report.valid else "bold red")
    if not report.valid:
        raise typer.Exit(1)


@app.command("run")
def run(
    name: Name,
    prompt: Annotated[str, typer.Option("--prompt", help="The start message's content.")],
    max_rounds: Annotated[Optional[int], typer.Option("--max-rounds", min=1, help="Round limit (capped by engine.max_rounds).")] = None,
    home: HomeOption = None,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON line per round, then one for the outcome.")] = False,
) -> None:
    """Start a thread now and print its rounds as they happen.

    Goes through the running engine if there is one, otherwise runs the thread
    in this process (holding the instance lock). Stops when a role asks a
    person (the thread waits; answer with `nerve thread approve|reject`) or
    waits for an event (it resumes in the engine when one comes).
    Exit code: 0 completed, 1 failed, crashed or cancelled, 4 dropped (overflow),
    5 waiting (for a person or an event), 130 interrupted (Ctrl-C: a standalone thread ends
    crashed, or resumes at the next `nerve run` if its workflow is idempotent;
    one in the engine goes on, only the printing stops).

    Example: nerve workflow run code-review --prompt "review PR 12" --max-rounds 6
    """
    from nerve_cli.cli import output, thread_view
    from nerve_cli.home import require_instance
    from nerve_cli.ops.workflows.runner import run_workflow

    def report(level: str, line: str) -> None:
        # standalone only: what the worker prints (user print()s, tracebacks) and worker deaths, on stderr;
        # thread events themselves are rendered from the log rows
        if f"workflow {name} pid " in line:
            output.err_console().print(line, style="dim", markup=False, highlight=False)
        elif level == "warn":
            output.warn(line)

    rounds: list[int] = []

    def on_event(run_id: str, type_: str, payload: dict) -> None:
        if type_ == "message" and payload.get("role") != thread_view.START:
            rounds.append(payload.get("round") or len(rounds) + 1)
            if json_:
                from nerve_cli.contract.threads import round_line

                output.print_json_line(round_line(run_id, payload))
        if not json_:
            thread_view.live_event(run_id, type_, payload)

    result = run_workflow(require_instance(home), name, prompt, max_rounds, on_event, report)
    status = result["status"]
    if json_:
        from nerve_cli.contract.threads import outcome_line

        output.print_json_line(outcome_line(result, len(rounds)))
    if status == "interrupted":
        if not json_:
            run_id = result["run_id"]
            if result.get("via") == "engine":
                output.warn(f"stopped following {run_id}: it goes on in the engine; "
                            f"see `nerve thread show {run_id}`")
            else:
                output.warn(f"{run_id} interrupted; see `nerve thread show {run_id}`")
        raise typer.Exit(EXIT_INTERRUPTED)
    if status == ThreadStatus.WAITING:
        raise typer.Exit(EXIT_WAITING)
    if status != ThreadStatus.COMPLETED:
        raise typer.Exit(EXIT_DROPPED if status == ThreadStatus.DROPPED else EXIT_FAILED)


# disable/enable live in workflow_lifecycle (shared lifecycle rules with senses)
app.command("disable")(workflow_lifecycle.disable)
app.command("enable")(workflow_lifecycle.enable)
app.command("delete")(sense_remove.delete_workflow)
