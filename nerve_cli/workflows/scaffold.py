"""`nerve workflow new NAME`: write workflows/NAME.py from the template, register it, commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nerve_cli.config.edit import add_workflow
from nerve_cli.config.load import load_config
from nerve_cli.config.model import check_name
from nerve_cli.errors import WorkflowError
from nerve_cli.home import Layout
from nerve_cli.instance.git import commit
from nerve_cli.instance.scaffold import templates_dir

TEMPLATE = "workflow.py"
DEFAULT_SETTINGS = {"concurrency": 1, "overflow": "queue"}


@dataclass(frozen=True)
class NewWorkflow:
    name: str
    path: Path
    sha: str | None  # None when the instance is not a git repo


def new_workflow(home: Path, name: str) -> NewWorkflow:
    """Scaffold a working two-role workflow and register it in nerve.yaml (comments kept)."""
    try:
        check_name(name)
    except ValueError as exc:
        raise WorkflowError(f"cannot create workflow: {exc}") from None
    layout = Layout(Path(home))
    path = layout.workflow_file(name)
    if path.exists():
        raise WorkflowError(f"workflows/{name}.py already exists; pick another name or edit that file")
    if name in load_config(layout.home).workflows:
        raise WorkflowError(f"workflow {name} is already in nerve.yaml (workflows.{name}) but has no "
                            f"workflows/{name}.py; create that file or remove the entry")
    text = (templates_dir("workflow") / TEMPLATE).read_text().replace("{{name}}", name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    try:
        add_workflow(layout.home, name, dict(DEFAULT_SETTINGS))
    except BaseException:
        path.unlink(missing_ok=True)  # never leave a file nerve.yaml does not know about
        raise
    sha = commit(layout.home, [path, layout.config], f"Add workflow {name}")
    return NewWorkflow(name, path, sha)
