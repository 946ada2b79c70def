"""`nerve workflow new NAME [--llm]`: write workflows/NAME.py from a template, register it, commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nerve_cli.config.edit import add_workflow
from nerve_cli.config.load import load_config
from nerve_cli.config.model import check_model_id, check_name
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.instance.change import Change
from nerve_cli.instance.scaffold import templates_dir

TEMPLATE = "workflow.py"
LLM_TEMPLATE = "llm_workflow.py"
DEFAULT_SETTINGS = {"concurrency": 1, "overflow": "queue"}
# model calls are slow and flaky: bound each one and retry with back-off
LLM_SETTINGS = {**DEFAULT_SETTINGS, "role_timeout": "2m", "role_retries": 2, "role_backoff": "2s"}


@dataclass(frozen=True)
class NewWorkflow:
    name: str
    path: Path
    sha: str | None  # None when the instance is not a git repo
    notes: tuple[str, ...] = ()  # e.g. that uncommitted edits of nerve.yaml were committed separately first


def new_workflow(home: Path, name: str, *, llm: bool = False, model: str | None = None) -> NewWorkflow:
    """Scaffold a working two-role workflow and register it in nerve.yaml (comments kept).

    `llm`: a model-backed writer and critic (llm_role); `model` is written as
    workflows.NAME.model, else they use llm's default model.
    """
    try:
        check_name(name)
    except ValueError as exc:
        raise WorkflowError(f"cannot create workflow: {exc}") from None
    if model is not None and not llm:
        raise WorkflowError("--model goes with --llm (a model-backed workflow)")
    if model is not None:
        try:
            check_model_id(model)
        except ValueError as exc:
            raise WorkflowError(f"--model: {exc}") from None
    layout = Layout(Path(home))
    path = layout.workflow_file(name)
    if path.exists():
        raise WorkflowError(f"workflows/{name}.py already exists; pick another name or edit that file")
    if name in load_config(layout.home).workflows:
        raise WorkflowError(f"workflow {name} is already in nerve.yaml (workflows.{name}) but has no "
                            f"workflows/{name}.py; create that file or remove the entry")
    change = Change(layout.home, f"workflow new {name}", [path, layout.config])
    change.protect()
    template = LLM_TEMPLATE if llm else TEMPLATE
    text = (templates_dir("workflow") / template).read_text().replace("{{name}}", name)
    settings = dict(LLM_SETTINGS if llm else DEFAULT_SETTINGS)
    if model is not None:
        settings["model"] = model
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    try:
        add_workflow(layout.home, name, settings)
    except BaseException:
        path.unlink(missing_ok=True)  # never leave a file nerve.yaml does not know about
        raise
    return NewWorkflow(name, path, change.commit(), tuple(change.notes()))
