"""Workflow definitions, one checker per kind: what `nerve workflow check` and `nerve config check` run.

A workflow named in nerve.yaml is defined by a file in `workflows/`; its kind is
told by the file's name. Each kind has one checker that lists every problem of
its definitions at once, as `Problem`s with file:line, the way nerve.yaml's own
check does. The Python kind (`workflows/NAME.py`) imports the file in a child
process (`config.code`, `automaton.check`): never in the caller. The pipeline
kind (`workflows/NAME.pipeline.yaml|yml|json`, `config.pipeline`) reads its
file and the roles module's text. Another kind joins with `register`:

    register(DefinitionKind("flow", (".flow.yaml",), check_flows))

where `check_flows(home, names, senses) -> list[Problem]`. When files of two
kinds define one workflow, the longer name wins (`x.pipeline.yaml` over `x.py`),
as the worker loading it decides (`home.Layout.workflow_file`).
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.config.code import check_code
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.pipeline import SUFFIXES as PIPELINE_SUFFIXES
from nerve_cli.config.pipeline import check_pipelines, roles_modules
from nerve_cli.config.problems import Problem
from nerve_cli.config.waits import wait_call
from nerve_cli.home import Layout
from nerve_cli.names import BUILTIN_SENSES

# (instance folder, workflow names of this kind, the instance's sense names) → every problem
Checker = Callable[[Path, list[str], list[str]], list[Problem]]


@dataclass(frozen=True)
class DefinitionKind:
    name: str  # "python"
    suffixes: tuple[str, ...]  # what `workflows/NAME` may end with, the usual one first: (".py",)
    check: Checker

    def file(self, home: Path, workflow: str) -> Path:
        """The file of this kind defining `workflow`: the first of its suffixes that exists, else the usual one."""
        folder = Layout(Path(home)).workflows
        return next((folder / f"{workflow}{s}" for s in self.suffixes if (folder / f"{workflow}{s}").is_file()),
                    folder / f"{workflow}{self.suffixes[0]}")


def _check_python(home: Path, names: list[str], senses: list[str]) -> list[Problem]:
    return check_code(home, [], names) + wait_warnings(home, names, senses)


def sources_named(config: NerveConfig) -> list[str]:
    """Every source nerve.yaml names: its senses, its declared channels and what its reflexes listen to."""
    return list(dict.fromkeys([*config.senses, *config.channels, *(s for r in config.reflexes for s in r.on)]))


def wait_warnings(home: Path, workflows: list[str], senses: list[str]) -> list[Problem]:
    """Warnings for literal `wait_for_event("source", ...)` calls in these Python definitions whose source
    nerve.yaml never names (`senses`: what it names, `sources_named`) but is one letter or so from one it
    does (a channel of that name is legal, and likely a typo: `ci.dnoe` beside a declared `ci.done`). Read from
    the files' text (never imported), here rather than in the check child: it depends on nerve.yaml, the
    child's answer only on the files, so that answer can be kept."""
    known = [*senses, *BUILTIN_SENSES]
    found: list[Problem] = []
    for name in workflows:
        path = PYTHON.file(home, name)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue  # the child reports what keeps it from loading
        for node in ast.walk(tree):
            wait = wait_call(node)
            if wait is None:
                continue
            source = wait[0]
            near = [] if source in known else difflib.get_close_matches(source, known, n=1, cutoff=0.8)
            if near:
                found.append(Problem(f"workflows.{name}", f"wait_for_event({source!r}) waits for {source!r}, which "
                                     f"nerve.yaml names nowhere (no sense, channel or reflex): did you mean "
                                     f"{near[0]!r}?", "warning", getattr(node, "lineno", None),
                                     file=f"workflows/{path.name}"))
    return found


PYTHON = DefinitionKind("python", (".py",), _check_python)
PIPELINE = DefinitionKind("pipeline", PIPELINE_SUFFIXES, check_pipelines)
KINDS: dict[str, DefinitionKind] = {PYTHON.name: PYTHON, PIPELINE.name: PIPELINE}


def register(kind: DefinitionKind) -> None:
    """Add a kind of definition; its files are checked by `kind.check`."""
    KINDS[kind.name] = kind


def kind_of(home: Path, workflow: str) -> DefinitionKind | None:
    """The kind whose file defines `workflow` (the longest suffix first: `x.pipeline.yaml` before `x.yaml`)."""
    named = [(suffix, kind) for kind in KINDS.values() for suffix in kind.suffixes]
    for suffix, kind in sorted(named, key=lambda item: -len(item[0])):
        if (Layout(Path(home)).workflows / f"{workflow}{suffix}").is_file():
            return kind
    return None


def unregistered(home: Path, registered: list[str]) -> list[tuple[str, str]]:
    """(file in workflows/, the workflow it would define) for each definition nerve.yaml does not register, so
    nothing would ever run it: a file of any kind by its name, less Python modules that are not workflows
    (a pipeline's `roles:` module, a name starting with `_`)."""
    folder = Layout(Path(home)).workflows
    if not folder.is_dir():
        return []
    suffixes = sorted(((s, k) for k in KINDS.values() for s in k.suffixes), key=lambda x: -len(x[0]))
    defined = []
    for path in sorted(folder.iterdir()):
        match = next(((path.name[: -len(s)], k) for s, k in suffixes if path.name.endswith(s)), None)
        if match is not None and path.is_file() and not path.name.startswith((".", "_")):
            defined.append((path.name, *match))
    helpers = roles_modules(Path(home), [name for _file, name, kind in defined if kind is PIPELINE])
    return [(file, name) for file, name, kind in defined
            if name not in registered and not (kind is PYTHON and name in helpers)]


def by_kind(home: Path, workflows: list[str]) -> dict[str, list[str]]:
    """Workflow names grouped by the kind of their definition file (those with none are left out)."""
    out: dict[str, list[str]] = {}
    for name in workflows:
        kind = kind_of(home, name)
        if kind is not None:
            out.setdefault(kind.name, []).append(name)
    return out


def check_definitions(home: Path, workflows: list[str], senses: list[str],
                      python_with: list[str] | None = None) -> list[Problem]:
    """Every problem of these workflows' definitions, each kind by its checker. `python_with`: senses to
    import in the same child as the Python definitions (config check imports both at once)."""
    grouped = by_kind(home, workflows)
    problems: list[Problem] = []
    python = grouped.pop(PYTHON.name, [])
    if python or python_with:
        problems += check_code(home, python_with or [], python) + wait_warnings(home, python, senses)
    for kind, names in grouped.items():
        problems += KINDS[kind].check(home, names, senses)
    return problems
