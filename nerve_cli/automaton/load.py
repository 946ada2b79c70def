"""Import `workflows/<name>.py` and check the `workflow` object it defines.

Only workflow workers (and development-time commands) call this: the kernel never
imports user code. Every problem becomes a `WorkflowLoadError` carrying a
`Failure` with the file and line, so the kernel can show where to look.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator, Mapping
from pathlib import Path

from nerve_cli.automaton.model import RESERVED_ROLES, WorkflowDefinition
from nerve_cli.automaton.thread import Failure, ThreadContext, describe
from nerve_cli.errors import ErrorType, WorkflowError
from nerve_cli.home import Layout
from nerve_cli.usercode import ensure_package, import_file

ROOT_PACKAGE = "_nerve_workflows"


class WorkflowLoadError(WorkflowError):
    type = ErrorType.WORKFLOW_LOAD_ERROR

    def __init__(self, failure: Failure) -> None:
        at = f" at {failure.file}:{failure.line}" if failure.file else ""
        super().__init__(f"{failure.type}: {failure.message}{at}")
        self.failure = failure


def import_workflow_module(path: Path, name: str) -> types.ModuleType:
    """Execute the file as `_nerve_workflows.<name>`; the user's exceptions propagate.

    The package spans workflows/, so a workflow file can import a sibling helper with `from . import x`.
    """
    ensure_package(ROOT_PACKAGE, path.parent)
    return import_file(f"{ROOT_PACKAGE}.{name}", path)


def _problem(message: str, rel: str, line: int | None = None) -> WorkflowLoadError:
    return WorkflowLoadError(Failure("WorkflowError", message, "", rel, line))


def _object_line(module: types.ModuleType, path: Path) -> int | None:
    """The line that assigns `workflow = ...`, for messages about that object."""
    try:
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if text.startswith("workflow") and "=" in text.split("#")[0]:
                return number
    except OSError:
        pass
    return None


def validate(definition: object, rel: str, line: int | None = None) -> WorkflowDefinition:
    """Check the shape of a definition; raises WorkflowLoadError naming the first problem."""
    for problem in shape_problems(definition, rel, line):
        raise problem
    return definition  # type: ignore[return-value]


def shape_problems(definition: object, rel: str, line: int | None = None) -> Iterator[WorkflowLoadError]:
    """Every problem of a definition's shape (`workflow check` lists them all; a worker stops at the first)."""
    if not isinstance(definition, WorkflowDefinition):
        yield _problem(
            f"`workflow` must be a WorkflowDefinition(roles=..., moderator=...), got {type(definition).__name__}",
            rel, line)
        return
    roles = definition.roles
    if not isinstance(roles, Mapping) or not roles:
        yield _problem("workflow.roles must be a non-empty mapping of role name -> async function", rel, line)
        roles = {}
    for role, fn in roles.items():
        if not isinstance(role, str) or not role:
            yield _problem(f"role names must be non-empty strings, got {role!r}", rel, line)
        elif role in RESERVED_ROLES:
            yield _problem(f"role name {role!r} is reserved (it names the start, the end, a person's answer, an "
                           "event or a tool note); rename the role", rel, line)
        if not callable(fn):
            yield _problem(f"role {role!r} must be an async function, got {type(fn).__name__}", rel, line)
    if not callable(definition.moderator):
        yield _problem(f"workflow.moderator must be a function, got {type(definition.moderator).__name__}",
                       rel, line)
        return
    if inspect.iscoroutinefunction(definition.moderator) or inspect.isasyncgenfunction(definition.moderator):
        yield _problem("workflow.moderator is async; it must be a plain (non-async) pure function "
                       "messages -> role name or END", *_def_at(definition.moderator, rel, line))
    checks: list[tuple[str, object]] = [("moderator", definition.moderator),
                                         *((f"role {r!r}", f) for r, f in roles.items())]
    for what, check in checks:
        why = _arity_problem(check) if callable(check) else None
        if why:
            yield _problem(f"{what} {why}", *_def_at(check, rel, line))


def _arity_problem(fn: object) -> str | None:
    """Roles and the moderator are called with one argument, the messages so far."""
    try:
        params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p.name for p in positional if p.default is p.empty]
    if len(required) > 1:
        return f"takes {len(required)} required arguments ({', '.join(required)}) but is called with one: the messages"
    if not positional and not any(p.kind is p.VAR_POSITIONAL for p in params):
        return "takes no arguments but is called with one: the messages"
    return None


def _def_at(fn: object, rel: str, line: int | None) -> tuple[str, int | None]:
    """Where a function is defined (its file relative to the instance when it is the workflow file)."""
    code = getattr(fn, "__code__", None)
    if code is None or not code.co_filename.endswith(rel):
        return rel, line
    return rel, code.co_firstlineno


def load_workflow(home: Path, name: str) -> WorkflowDefinition:
    """Import workflows/<name>.py and return its validated `workflow` object."""
    path = Layout(Path(home)).workflow_file(name).resolve()
    root = Path(home).resolve()
    rel = str(path.relative_to(root))
    if not path.is_file():
        raise _problem(f"{rel} does not exist; create it with `nerve workflow new {name}`", rel)
    try:
        module = import_workflow_module(path, name)
    except (Exception, SystemExit) as exc:
        raise WorkflowLoadError(describe(exc, ThreadContext(source=path, root=root))) from exc
    if not hasattr(module, "workflow"):
        raise _problem(f"{rel} defines no `workflow`; add `workflow = WorkflowDefinition(roles=..., "
                       "moderator=...)`", rel)
    return validate(module.workflow, rel, _object_line(module, path))
