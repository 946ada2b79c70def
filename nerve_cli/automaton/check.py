"""A Python workflow definition checked as a whole: every problem at once, each with its file:line.

Run where user code may be imported (the `worker check` child, never the CLI).
After the import and the `workflow` object (a failure there stops the check:
nothing else can be looked at), it lists, rather than stopping at the first:

- the definition's shape (`load.shape_problems`): roles, reserved names,
  callables, a plain moderator, one argument each;
- the moderator's literal choices (`return "reviewr"`) that name no role, with
  the nearest role name;
- model-backed roles' tools that tell the model nothing (no description, an
  argument without a type);
- literal calls of `ask_person(..., schema={...})` whose schema is not a JSON
  Schema, and `wait_for_event("source", ...)` whose source is not a valid name.

(A wait whose source looks like a misspelt sense is the caller's to warn
about, from the file's text and nerve.yaml: `config.definitions.wait_warnings`;
this answer depends on the definition's files alone, so it can be kept.)
"""

from __future__ import annotations

import ast
import difflib
import inspect
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from nerve_cli.automaton.answers import check_schema
from nerve_cli.automaton.load import (
    WorkflowLoadError,
    _def_at,
    _object_line,
    import_workflow_module,
    shape_problems,
)
from nerve_cli.automaton.model import END, WorkflowDefinition
from nerve_cli.automaton.thread import ThreadContext, describe
from nerve_cli.home import Layout
from nerve_cli.names import channel_problem


@dataclass(frozen=True)
class Finding:
    """One problem of a definition: where, what, how bad."""

    message: str
    file: str
    line: int | None
    severity: str = "error"  # error | warning
    type: str = "WorkflowError"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "traceback": "", "file": self.file, "line": self.line,
                "severity": self.severity}


def definition_problems(home: Path, name: str) -> list[Finding]:
    """Every problem of workflows/<name>.py."""
    path = Layout(Path(home)).workflow_file(name).resolve()
    root = Path(home).resolve()
    rel = str(path.relative_to(root))
    if not path.is_file():
        return [Finding(f"{rel} does not exist; create it with `nerve workflow new {name}`", rel, None)]
    try:
        module = import_workflow_module(path, name)
    except (Exception, SystemExit) as exc:
        failure = describe(exc, ThreadContext(source=path, root=root))
        return [Finding(failure.message, failure.file or rel, failure.line, type=failure.type)]
    if not hasattr(module, "workflow"):
        return [Finding(f"{rel} defines no `workflow`; add `workflow = WorkflowDefinition(roles=..., "
                        "moderator=...)`", rel, None)]
    line = _object_line(module, path)
    found = [Finding(e.failure.message, e.failure.file or rel, e.failure.line)
             for e in shape_problems(module.workflow, rel, line)]
    definition = module.workflow
    if not isinstance(definition, WorkflowDefinition):
        return found
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        tree = None  # it imported, so this does not happen; the shape was checked anyway
    if tree is not None:
        found += _moderator_choices(definition, tree, rel)
        found += _calls(tree, rel)
    found += _tools(definition, rel, line)
    return found


def _moderator_choices(definition: WorkflowDefinition[Any], tree: ast.AST, rel: str) -> Iterator[Finding]:
    """The moderator's `return "name"` that names no role."""
    node = _function_node(tree, definition.moderator)
    roles = [r for r in definition.roles if isinstance(r, str)]
    if node is None:
        return
    for ret in ast.walk(node):
        if not isinstance(ret, ast.Return) or ret.value is None:
            continue
        for value in _literals(ret.value):
            if value == END or value in roles:
                continue
            near = difflib.get_close_matches(value, roles, n=1, cutoff=0.6)
            fix = f"did you mean {near[0]!r}?" if near else "return a role name or END"
            yield Finding(f"the moderator returns {value!r}, which is not a role (roles: {', '.join(roles)}); {fix}",
                          rel, ret.lineno)


def _literals(value: ast.expr) -> Iterator[str]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        yield value.value
    elif isinstance(value, ast.IfExp):
        yield from _literals(value.body)
        yield from _literals(value.orelse)


def _function_node(tree: ast.AST, fn: Any) -> ast.FunctionDef | ast.Lambda | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            return node  # type: ignore[return-value]
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno and fn.__name__ == "<lambda>":
            return node
    return None


def _calls(tree: ast.AST, rel: str) -> Iterator[Finding]:
    """Literal ask_person schemas and wait_for_event sources, checked before any thread runs into them."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if called == "ask_person":
            schema = next((k.value for k in node.keywords if k.arg == "schema"), None)
            literal = _literal(schema)
            if literal is not None:
                try:
                    check_schema(literal)
                except ValueError as exc:
                    yield Finding(str(exc), rel, node.lineno)
        elif called == "wait_for_event" and node.args:
            source = _literal(node.args[0])
            if not isinstance(source, str):
                continue
            problem = channel_problem(source)
            if problem is not None:
                yield Finding(f"wait_for_event: {problem} ({source!r})", rel, node.lineno)


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _tools(definition: WorkflowDefinition[Any], rel: str, line: int | None) -> Iterator[Finding]:
    """Tools a model is told nothing about: no description, or an argument with no type."""
    for role, fn in definition.roles.items():
        for spec in getattr(fn, "tools", None) or []:
            function = getattr(spec, "function", None)
            if not isinstance(function, types.FunctionType):
                continue
            file, at = _def_at(function, rel, line)
            if not (getattr(spec, "description", None) or inspect.getdoc(function)):
                yield Finding(f"role {role!r}: tool {spec.name!r} has no docstring (or description=): the model "
                              "is told nothing about what it does", file, at, "warning")
            untyped = [p.name for p in inspect.signature(function).parameters.values()
                       if p.annotation is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if untyped:
                yield Finding(f"role {role!r}: tool {spec.name!r} has arguments without a type "
                              f"({', '.join(untyped)}): the model is told nothing of what to pass", file, at,
                              "warning")


__all__ = ["Finding", "WorkflowLoadError", "definition_problems"]
