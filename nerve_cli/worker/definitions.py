"""A workflow worker's definition: `workflows/NAME.py`, or a declarative `workflows/NAME.pipeline.yaml|json`.

Both become the same `WorkflowDefinition` (roles and a moderator), so the
worker runs a pipeline's threads as it runs any other. When both files exist
the pipeline is the definition (the longer name is the more specific one).
"""

from __future__ import annotations

from pathlib import Path

from nerve_cli.automaton.load import WorkflowLoadError, load_workflow, validate
from nerve_cli.automaton.model import WorkflowDefinition
from nerve_cli.automaton.thread import Failure
from nerve_cli.config.pipeline import PipelineError, pipeline_file, read_pipeline
from nerve_cli.roles.pipeline import pipeline_workflow


def load_definition(home: Path, name: str) -> WorkflowDefinition:
    """The workflow `name` defines, checked; WorkflowLoadError with the file and line of what is wrong."""
    path = pipeline_file(home, name)
    if path is None:
        return load_workflow(home, name)
    rel = path.relative_to(Path(home).resolve()).as_posix() if path.is_absolute() else path.as_posix()
    try:
        definition = pipeline_workflow(home, read_pipeline(path, rel))
    except PipelineError as exc:
        first = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more: `nerve workflow check {name}` lists them)" if exc.problems[1:] else ""
        raise WorkflowLoadError(Failure("PipelineError", f"{first.path}: {first.message}{more}" if first.path
                                        else first.message + more, "", first.file, first.line)) from exc
    return validate(definition, rel)
