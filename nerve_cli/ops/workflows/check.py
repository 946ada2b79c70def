"""`nerve workflow check [NAME]`: workflow definitions checked as a whole, every problem at once with file:line.

What nerve.yaml says of each workflow (its `workflows.NAME` keys, checked as
`nerve config check` checks them), whether a definition file exists, and then
each definition by the checker of its kind (`config.definitions`): for a Python
file, imported in a child process, its shape, its moderator's literal choices,
its tools, its literal waits and answer schemas (`automaton.check`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.config.check import unregistered_message
from nerve_cli.config.definitions import KINDS, check_definitions, kind_of, sources_named, unregistered
from nerve_cli.config.load import Validation, config_path, validate_file
from nerve_cli.config.problems import Problem, count_words
from nerve_cli.config.rules import hint
from nerve_cli.config.source import line_of
from nerve_cli.errors import WorkflowError
from nerve_cli.words import plural


@dataclass
class WorkflowCheck:
    problems: list[Problem]
    workflows: list[dict[str, Any]] = field(default_factory=list)  # {name, kind, file, errors, warnings}

    @property
    def valid(self) -> bool:
        return not any(p.is_error for p in self.problems)

    def verdict(self) -> str:
        checked = plural(len(self.workflows), "workflow")
        if not self.problems:
            return f"{checked} checked: no problems"
        return f"{checked} checked: {count_words(self.problems)}"


def check_workflows(home: Path, name: str | None = None) -> WorkflowCheck:
    """Check one workflow (NAME) or every one in nerve.yaml; WorkflowError for a NAME nerve.yaml lacks."""
    home = Path(home)
    result = validate_file(config_path(home))
    wanted = "workflows" if name is None else f"workflows.{name}"
    problems = [p for p in result.problems if p.path == wanted or p.path.startswith(wanted + ".")
                or (p.path.startswith("workflows") and name is None)]
    known, senses = _names(result, "workflows"), _names(result, "senses")
    if not known and result.config is None and not problems:  # nerve.yaml does not even parse: that is all there is
        return WorkflowCheck([p for p in result.problems if p.is_error])
    if name is not None and name not in known:
        raise WorkflowError(f"no workflow `{name}` in nerve.yaml{hint(name, known)}")
    names = [name] if name is not None else known
    missing = [n for n in names if kind_of(home, n) is None]
    for n in missing:
        files = ", ".join(f"workflows/{n}{s}" for k in KINDS.values() for s in k.suffixes)
        problems.append(Problem(f"workflows.{n}", f"no definition: none of {files} exists; "
                                f"create one (`nerve workflow new {n}` scaffolds a Python one)", "error",
                                line_of(result.doc, ("workflows", n)), file=config_path(home).name))
    named = sources_named(result.config) if result.config is not None else senses
    problems += check_definitions(home, [n for n in names if n not in missing], named)
    if name is None:
        problems += [Problem("workflows", unregistered_message(file, n), "warning", file=config_path(home).name)
                     for file, n in unregistered(home, known)]
    problems.sort(key=lambda p: (p.file, p.line or 0, p.path))
    rows = []
    for n in names:
        kind = kind_of(home, n)
        file = f"workflows/{kind.file(home, n).name}" if kind else None
        # a definition's own problems name its file; nerve.yaml's name the workflow's keys
        mine = [p for p in problems if p.path == f"workflows.{n}" or p.path.startswith(f"workflows.{n}.")
                or (file is not None and p.file == file)]
        rows.append({"name": n, "kind": kind.name if kind else None, "file": file,
                     "errors": sum(p.is_error for p in mine), "warnings": sum(not p.is_error for p in mine)})
    return WorkflowCheck(problems, rows)


def _names(result: Validation, section: str) -> list[str]:
    """The names under a section of nerve.yaml, from the model, or from the parsed file when the model did not
    validate (a definition is checked even while a key of its settings is wrong)."""
    if result.config is not None:
        return list(getattr(result.config, section))
    data = result.data.get(section) if isinstance(result.data, dict) else None
    return [str(k) for k in data] if isinstance(data, dict) else []
