"""A pipeline's roles: each step as the role its `who` names, each gate as a question to a person.

- `who: person`: the step is a person's to do; the thread waits until they
  approve it (done) or reject it (the thread ends there).
- `who: model`: `llm_role` asked to do the step's `do`, with the chain so far
  (the step's `model`, else the file's, else the workflow's or llm's default).
- any other name: the async role function of that name in `workflows/<roles>.py`.

A step that is gated (its `gate`, `irreversible`, or a risk at or above the
file's `gate_risk`) is preceded by the role `gate:<id>`, which asks a person to
approve it. Every message a step writes carries `step` in its meta.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from nerve_cli.automaton.load import import_workflow_module
from nerve_cli.automaton.model import RoleResult, WorkflowDefinition, WorkflowMessage, ask_person
from nerve_cli.automaton.pipeline import gate_role, next_role
from nerve_cli.config.pipeline import MODEL_WHO, Pipeline, PipelineError, Step
from nerve_cli.config.problems import Problem
from nerve_cli.home import Layout
from nerve_cli.roles.llm import llm_role, transcript

Role = Callable[[Sequence[WorkflowMessage]], Awaitable[RoleResult[Any]]]


def pipeline_workflow(home: Path, pipeline: Pipeline) -> WorkflowDefinition:
    """The roles and moderator a pipeline compiles to (PipelineError: a `who` its roles module lacks)."""
    module = _roles_module(home, pipeline) if pipeline.roles else None
    roles: dict[str, Role] = {}
    for step in pipeline.steps:
        if step.by_person:
            roles[step.id] = _person(step)
        elif step.who == MODEL_WHO:
            roles[step.id] = _model(step, pipeline)
        else:
            roles[step.id] = _python(module, step, pipeline)
        if pipeline.gated(step):
            roles[gate_role(step.id)] = _gate(step, pipeline)

    def moderator(messages: Sequence[WorkflowMessage]) -> str:
        return next_role(pipeline, messages)

    return WorkflowDefinition(roles=roles, moderator=moderator)


def _described(step: Step) -> str:
    return (step.title or step.id) + (f": {step.do}" if step.do else "")


def _person(step: Step) -> Role:
    async def role(messages: Sequence[WorkflowMessage]) -> RoleResult[Any]:
        return ask_person(f"Step `{step.id}` is yours to do — {_described(step)}. Approve when it is done, "
                          "reject to stop the pipeline.", {"step": step.id, "who": step.who})
    return role


def _gate(step: Step, pipeline: Pipeline) -> Role:
    async def role(messages: Sequence[WorkflowMessage]) -> RoleResult[Any]:
        return ask_person(f"Approve step `{step.id}` ({pipeline.why_gated(step)}, risk {step.risk}) — "
                          f"{_described(step)}? Reject to stop the pipeline before it.",
                          {"step": step.id, "gate": True, "risk": step.risk,
                           "irreversible": step.irreversible or step.runs_irreversible is not None})
    return role


def _model(step: Step, pipeline: Pipeline) -> Role:
    def prompt(messages: Sequence[WorkflowMessage]) -> str:
        return f"{step.do}\n\n{transcript(messages)}"

    inner = llm_role(model=step.model or pipeline.model, prompt=prompt)

    async def role(messages: Sequence[WorkflowMessage]) -> RoleResult[Any]:
        result = await inner(messages)
        return RoleResult(result.content, {**result.meta, "step": step.id})
    return role


def _python(module: Any, step: Step, pipeline: Pipeline) -> Role:
    fn = getattr(module, step.who, None)
    if not inspect.iscoroutinefunction(fn):
        found = "is not an async function" if fn is not None else "is not defined there"
        raise PipelineError([Problem(f"steps.{step.id}.who", f"`{step.who}` {found} in workflows/{pipeline.roles}.py: "
                                     f"define `async def {step.who}(messages)` returning a RoleResult",
                                     line=step.line, file=pipeline.file)])

    async def role(messages: Sequence[WorkflowMessage]) -> RoleResult[Any]:
        result = await fn(messages)
        if not isinstance(result, RoleResult):
            return result  # the automaton says what is wrong with it, with the role's name
        return type(result)(result.content, {**result.meta, "step": step.id})
    return role


def _roles_module(home: Path, pipeline: Pipeline) -> Any:
    path = Layout(home).workflows / f"{pipeline.roles}.py"
    if not path.is_file():
        raise PipelineError([Problem("roles", f"workflows/{pipeline.roles}.py does not exist; it holds the role "
                                     "functions the steps' `who` name", file=pipeline.file)])
    return import_workflow_module(path, str(pipeline.roles))
