"""Declarative pipelines: a workflow written as a reviewed file of steps (the file and its checks).

`workflows/NAME.pipeline.yaml` (or `.pipeline.json`) lists `steps`, each with an
`id`, who does it (`who`: `person`, `model` for a model-backed role prompted
with the step's `do`, or the name of a role function in the module named by
the file's `roles:`), what it `needs` (ids of steps done before it), and
whether a person must approve it before it runs (`gate`). A step's `risk`
(R0..R3) and `irreversible` say what an error would cost: an irreversible
step, or one at or above the file's `gate_risk` (R2 unless set), always waits
for a person, whatever `gate` says. So does a step whose `do` runs a command
that cannot be taken back (git push, rm -r, DROP TABLE, a package publish,
terraform apply..., read as a shell reads the text: `config.commands`), or one
that cannot be read statically, whatever the step says of itself: a step's own
`risk` is not the only word on whether a person is needed.

It compiles to the same automaton as a Python workflow (`automaton.pipeline`:
the moderator and each step's state read from a chain; `roles.pipeline`: the
roles).

`read_pipeline` checks the whole file and reports every problem at once, each
with its line: unknown keys, missing or duplicate ids, unknown `needs`, cycles,
bad `who`, `risk` or `gate`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.config.commands import UNREADABLE, irreversible_command
from nerve_cli.config.problems import Problem
from nerve_cli.config.rules import hint
from nerve_cli.config.source import line_of, parse, to_plain

SUFFIXES = (".pipeline.yaml", ".pipeline.yml", ".pipeline.json")
PERSON_WHO, MODEL_WHO = "person", "model"
RISKS = ("R0", "R1", "R2", "R3")
DEFAULT_GATE_RISK = "R2"
GATE_PREFIX = "gate:"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
_ROLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
TOP_KEYS = ("title", "done", "roles", "model", "gate_risk", "steps")
STEP_KEYS = ("id", "title", "who", "do", "needs", "gate", "risk", "irreversible", "model", "done", "why")


@dataclass(frozen=True)
class Step:
    id: str
    who: str
    title: str = ""
    do: str = ""
    needs: tuple[str, ...] = ()
    gate: bool = False  # as written
    risk: str = "R0"
    irreversible: bool = False
    model: str | None = None
    line: int | None = None

    @property
    def by_person(self) -> bool:
        return self.who == PERSON_WHO

    @property
    def runs_irreversible(self) -> str | None:
        """The irreversible command its `do` runs (`config.commands`' label), or None."""
        return irreversible_command(self.do)


@dataclass(frozen=True)
class Pipeline:
    name: str
    file: str  # relative to the instance, e.g. workflows/release.pipeline.yaml
    steps: tuple[Step, ...]
    title: str = ""
    done: str = ""
    roles: str | None = None  # module in workflows/ holding the role functions a step's `who` names
    model: str | None = None  # the default model of `who: model` steps
    gate_risk: str = DEFAULT_GATE_RISK

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def gated(self, step: Step) -> bool:
        """Waits for a person before it runs: its gate, or what it would cost (irreversible, high risk, an
        irreversible command in its `do`). A person's own step is their approval: it has no gate of its own."""
        if step.by_person:
            return False
        return (step.gate or step.irreversible or step.runs_irreversible is not None
                or RISKS.index(step.risk) >= RISKS.index(self.gate_risk))

    def why_gated(self, step: Step) -> str:
        if step.irreversible:
            return "irreversible"
        if step.runs_irreversible is not None:
            return f"irreversible: its `do` runs {step.runs_irreversible}"
        if step.gate:
            return "gate"
        return f"risk {step.risk} (≥ {self.gate_risk})"


class PipelineError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


def pipeline_file(home: Path, name: str) -> Path | None:
    """The pipeline file defining workflow `name` (workflows/NAME.pipeline.yaml, .yml or .json), if any."""
    folder = Path(home).resolve() / "workflows"
    return next((folder / f"{name}{s}" for s in SUFFIXES if (folder / f"{name}{s}").is_file()), None)


def check_pipelines(home: Path, names: list[str], senses: list[str] | None = None) -> list[Problem]:
    """Every problem of these workflows' pipeline files, at once, with file:line: the file's own (see
    `check_text`), and a `who` its roles module does not define as an async function (read, not imported)."""
    problems: list[Problem] = []
    for name in names:
        path = pipeline_file(home, name)
        if path is None:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("", f"cannot be read: {exc}", file=f"workflows/{path.name}"))
            continue
        _pipeline, found, draft = _read(text, pipeline_name(path) or path.stem, f"workflows/{path.name}")
        problems += found + (_roles_defined(home, draft) if draft is not None else [])
    return problems


def _roles_defined(home: Path, pipeline: Pipeline) -> list[Problem]:
    named = [s for s in pipeline.steps if s.who not in (PERSON_WHO, MODEL_WHO)]
    if not named or not pipeline.roles:
        return []
    module = Path(home).resolve() / "workflows" / f"{pipeline.roles}.py"
    try:
        tree = ast.parse(module.read_text(encoding="utf-8"), str(module))
    except FileNotFoundError:
        return [Problem("roles", f"workflows/{pipeline.roles}.py does not exist; it holds the role functions "
                                 "the steps' `who` name", file=pipeline.file)]
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as exc:
        return [Problem("roles", f"workflows/{pipeline.roles}.py cannot be read: {exc}", file=pipeline.file)]
    defined = {n.name for n in tree.body if isinstance(n, ast.AsyncFunctionDef)}
    return [Problem(f"steps.{s.id}.who", f"workflows/{pipeline.roles}.py defines no `async def {s.who}(messages)`"
                    f"{hint(s.who, defined)}", line=s.line, file=pipeline.file)
            for s in named if s.who not in defined]


def roles_modules(home: Path, workflows: list[str]) -> set[str]:
    """The modules of workflows/ these workflows' pipeline files name as `roles:` (whatever else is wrong)."""
    out = set()
    for name in workflows:
        path = pipeline_file(home, name)
        try:
            doc, problems = parse(path.read_text(encoding="utf-8"), path.name) if path else (None, [])
        except (OSError, UnicodeDecodeError):
            continue
        data = to_plain(doc) if doc is not None and not problems else None
        if isinstance(data, dict) and isinstance(data.get("roles"), str):
            out.add(data["roles"])
    return out


def pipelines_of(home: Path, workflows: list[str]) -> dict[str, Pipeline]:
    """The pipelines among these workflows' definitions that read without a problem (`nerve workflow check`
    says what is wrong with the others)."""
    out = {}
    for name in workflows:
        path = pipeline_file(home, name)
        if path is not None:
            try:
                out[name] = read_pipeline(path, f"workflows/{path.name}")
            except PipelineError:
                continue
    return out


def pipeline_name(path: Path) -> str | None:
    """`release.pipeline.yaml` → "release"; None for a file that is not a pipeline."""
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return None


def read_pipeline(path: Path, rel: str | None = None) -> Pipeline:
    """The checked pipeline in `path`; PipelineError with every error of the file."""
    pipeline, problems = _checked(path, rel or path.name)
    if pipeline is None:
        raise PipelineError([p for p in problems if p.is_error])
    return pipeline


def _checked(path: Path, rel: str) -> tuple[Pipeline | None, list[Problem]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem("", f"cannot be read: {exc}", file=rel)]
    return check_text(text, pipeline_name(path) or path.stem, rel)


def check_text(text: str, name: str, rel: str) -> tuple[Pipeline | None, list[Problem]]:
    """(pipeline, problems): every problem at once; the pipeline only when none is an error."""
    pipeline, problems, _draft = _read(text, name, rel)
    return pipeline, problems


def _read(text: str, name: str, rel: str) -> tuple[Pipeline | None, list[Problem], Pipeline | None]:
    """As `check_text`, and the draft: the steps that read, whatever else is wrong (for the checks that need
    them, so every problem of the file is found in one go)."""
    doc, problems = parse(text, rel)
    if problems:
        return None, problems, None
    data = to_plain(doc)
    found = _Found(doc, rel)
    if not isinstance(data, dict):
        found.add((), "a pipeline is a mapping with `steps:` (a list of steps), e.g. steps: [{id: build, who: model, "
                      "do: ...}]")
        return None, found.problems, None
    _unknown(found, data, (), TOP_KEYS, "key")
    top = {k: data.get(k) for k in TOP_KEYS}
    for key in ("title", "done", "roles", "model"):
        if top[key] is not None and not isinstance(top[key], str):
            found.add((key,), f"expected text, got {top[key]!r}")
    if isinstance(top["roles"], str) and not _ROLE_RE.match(top["roles"]):
        found.add(("roles",), f"`roles` names a Python module in workflows/ (letters, digits, _), got {top['roles']!r}")
    gate_risk = top["gate_risk"] if top["gate_risk"] is not None else DEFAULT_GATE_RISK
    if gate_risk not in RISKS:
        found.add(("gate_risk",), f"expected one of {', '.join(RISKS)}, got {gate_risk!r}")
    steps = _steps(found, data.get("steps"), top)
    roles = top["roles"] if isinstance(top["roles"], str) and _ROLE_RE.match(top["roles"]) else None
    draft = Pipeline(name, rel, tuple(steps), str(top["title"] or ""), str(top["done"] or ""), roles,
                     top["model"] if isinstance(top["model"], str) else None,
                     gate_risk if gate_risk in RISKS else DEFAULT_GATE_RISK)
    return (None if found.errors else draft), found.problems, draft


@dataclass
class _Found:
    doc: Any
    file: str
    problems: list[Problem] = field(default_factory=list)

    def add(self, loc: tuple[Any, ...], message: str) -> None:
        self.problems.append(Problem(_path(loc), message, line=line_of(self.doc, loc), file=self.file))

    def warn(self, loc: tuple[Any, ...], message: str) -> None:
        self.problems.append(Problem(_path(loc), message, "warning", line=line_of(self.doc, loc), file=self.file))

    @property
    def errors(self) -> bool:
        return any(p.is_error for p in self.problems)


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unknown(found: _Found, data: dict, loc: tuple[Any, ...], known: Sequence[str], what: str) -> None:
    for key in data:
        if key not in known:
            found.add((*loc, key), f"unknown {what} `{key}`{hint(str(key), known)}; known: {', '.join(known)}")


def _steps(found: _Found, raw: Any, top: dict[str, Any]) -> list[Step]:
    if not isinstance(raw, list) or not raw:
        found.add(("steps",) if raw is not None else (), "`steps` is a non-empty list of steps, each with an `id` "
                                                          "and `who`")
        return []
    steps: list[Step] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        loc = ("steps", i)
        if not isinstance(item, dict):
            found.add(loc, f"a step is a mapping with `id` and `who`, got {item!r}")
            continue
        _unknown(found, item, loc, STEP_KEYS, "step key")
        step = _step(found, item, loc, top)  # a step with a good id takes part in the checks that follow
        if step is None:
            continue
        if step.id in seen:
            found.add((*loc, "id"), f"duplicate step id `{step.id}` (also steps[{seen[step.id]}]); ids are unique")
            continue
        seen[step.id] = i
        steps.append(step)
        command = step.runs_irreversible
        if command is not None and not step.irreversible and not step.by_person:
            what = (f"runs {UNREADABLE}, so what it does cannot be checked" if command == UNREADABLE
                    else f"runs {command}, which cannot be taken back")
            found.warn((*loc, "do"), f"step `{step.id}` {what}: it waits for a person whatever its risk says; say "
                                     "so in the file with `irreversible: true`")
    for step in steps:
        loc = ("steps", seen[step.id])
        for j, need in enumerate(step.needs):
            if need == step.id:
                found.add((*loc, "needs", j), f"step `{step.id}` needs itself")
            elif need not in seen:
                found.add((*loc, "needs", j), f"step `{step.id}` needs `{need}`, which is not a step"
                                              f"{hint(need, list(seen))}")
    _cycles(found, steps, raw)
    found.problems.sort(key=lambda p: p.line or 0)
    return steps


def _step(found: _Found, item: dict, loc: tuple[Any, ...], top: dict[str, Any]) -> Step | None:
    step_id = item.get("id")
    if step_id is None:
        found.add(loc, "a step needs an `id`")
    elif not isinstance(step_id, str) or not _ID_RE.match(step_id):
        found.add((*loc, "id"), f"a step id is letters, digits, _ and - (at most 64), got {step_id!r}")
    who = item.get("who")
    if who is None:
        found.add(loc, "a step needs `who`: person, model, or a role function's name")
    elif not isinstance(who, str) or not (who in (PERSON_WHO, MODEL_WHO) or _ROLE_RE.match(who)):
        found.add((*loc, "who"), f"`who` is person, model, or a role function's name, got {who!r}")
    elif who not in (PERSON_WHO, MODEL_WHO) and not top.get("roles"):
        found.add((*loc, "who"), f"`who: {who}` names a role function: say in which module with a top-level "
                                 "`roles: MODULE` (workflows/MODULE.py)")
    needs = item.get("needs", [])
    if isinstance(needs, str):
        needs = [needs]
    if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
        found.add((*loc, "needs"), f"`needs` is a list of step ids, got {needs!r}")
        needs = []
    risk = item.get("risk", "R0")
    if risk not in RISKS:
        found.add((*loc, "risk"), f"`risk` is one of {', '.join(RISKS)} (R3: hardest to undo), got {risk!r}")
    for key in ("gate", "irreversible"):
        if key in item and not isinstance(item[key], bool):
            found.add((*loc, key), f"`{key}` is true or false, got {item[key]!r}")
    for key in ("title", "do", "model", "done", "why"):
        if key in item and not isinstance(item[key], str):
            found.add((*loc, key), f"`{key}` is text, got {item[key]!r}")
    if who == MODEL_WHO and not item.get("do"):
        found.add(loc, "a `who: model` step needs `do`: what to ask the model")
    if not isinstance(step_id, str) or not _ID_RE.match(step_id):
        return None
    return Step(step_id, who if isinstance(who, str) else "", str(item.get("title", "")), str(item.get("do", "")),
                tuple(needs), item.get("gate") is True, risk if risk in RISKS else "R0", item.get("irreversible") is True,
                item.get("model") if isinstance(item.get("model"), str) else None, line_of(found.doc, loc))


def _cycles(found: _Found, steps: list[Step], raw: list) -> None:
    """A step that needs, through others, itself: reported once per loop, at its first step."""
    needs = {s.id: [n for n in s.needs if n != s.id] for s in steps}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    reported: set[frozenset[str]] = set()

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in needs.get(node, []):
            if nxt not in needs:
                continue
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                key = frozenset(loop)
                if key not in reported:
                    reported.add(key)
                    at = next(i for i, r in enumerate(raw) if isinstance(r, dict) and r.get("id") == loop[0])
                    found.add(("steps", at, "needs"), "steps need each other in a loop: " + " → ".join(loop)
                              + "; a pipeline runs forward (to do a step again, add a new step)")
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for step in steps:
        if step.id not in state:
            visit(step.id, [step.id])
