"""`nerve config check`: validate nerve.yaml and cross-check it against the instance folder.

Read-only: the file is never modified. Imports nothing heavy (no git, sqlite,
watchfiles or engine) so the command stays quick. User code is imported only in
a child process (`config.code`), and only once nerve.yaml itself is valid.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.config.code import CodeCheck, check_code
from nerve_cli.config.definitions import PYTHON, by_kind, check_definitions, kind_of, sources_named, unregistered, wait_warnings
from nerve_cli.config.load import Validation, config_path, validate_file
from nerve_cli.config.paths import resolve
from nerve_cli.config.patterns import Pattern
from nerve_cli.config.problems import Problem, Severity, count_words
from nerve_cli.config.rules import Channel
from nerve_cli.config.source import line_of
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.instance.deps import REQUIREMENTS, check
from nerve_cli.words import plural


@dataclass
class CheckReport:
    path: Path
    problems: list[Problem]
    channels: list[Channel]
    counts: dict[str, int] = field(default_factory=dict)
    patterns: list[Pattern] = field(default_factory=list)  # `on:` patterns and what each matches today

    @property
    def valid(self) -> bool:
        return not any(p.is_error for p in self.problems)

    def verdict(self) -> str:
        """'nerve.yaml is valid: 3 senses, 2 reflexes, 0 workflows; 1 external channel'."""
        if not self.valid:
            in_config = [p for p in self.problems if p.file == self.path.name]
            if any(p.is_error for p in in_config):
                return f"{self.path.name} is invalid: {count_words(self.problems)}"
            code = [p for p in self.problems if p.file != self.path.name]
            return f"{self.path.name} is valid, but the code would not load: {count_words(code)}"
        c = self.counts
        text = (
            f"{self.path.name} is valid: {plural(c['senses'], 'sense')}, {plural(c['reflexes'], 'reflex', 'reflexes')}, "
            f"{plural(c['workflows'], 'workflow')}; {plural(len(self.channels), 'external channel')}"
        )
        disabled = c.get("disabled", 0)
        if disabled:
            text += f"; {disabled} disabled"
        return text + (f" ({count_words(self.problems)})" if self.problems else "")

    def to_dict(self) -> dict[str, Any]:
        """The `--json` shape: {"valid", "problems": [{path, message, severity, line}], "channels"}."""
        return {
            "valid": self.valid,
            "problems": [p.to_dict() for p in self.problems],
            "channels": [c.to_dict() for c in self.channels],
            "patterns": [p.to_dict() for p in self.patterns],
        }


def check_instance(home: Path, *, code: bool = True, early: CodeCheck | None = None) -> CheckReport:
    """nerve.yaml, then the folder; with `code`, also import the senses and workflows (in a child process).

    `early`: a code check already running (`config.code.early_check`), used if it checks what the validated
    config asks for, discarded otherwise.
    """
    path = config_path(home)
    result = validate_file(path)
    problems = list(result.problems)
    if result.config is not None:
        problems += folder_problems(Path(home), result)
        problems.sort(key=lambda p: (p.file != path.name, p.file, p.line or 0, p.path))
        if code:
            problems += code_problems(Path(home), result.config, early)
            early = None
    if early is not None:
        early.cancel()
    return CheckReport(path, problems, result.channels, _counts(result), result.patterns)


def code_problems(home: Path, config: Any, early: CodeCheck | None = None) -> list[Problem]:
    """Import every enabled sense, and check every enabled workflow's definition as a whole (a Python one imported
    in the same child process as the senses; `early`: that child, started before nerve.yaml was validated)."""
    layout = Layout(home)
    senses = [n for n, s in config.senses.items() if s.enabled and (layout.sense_dir(n) / "sense.py").is_file()]
    workflows = [n for n, w in config.workflows.items() if w.enabled]
    grouped = by_kind(home, workflows)
    python = grouped.pop(PYTHON.name, [])
    found = early.problems(expect=(senses, python)) if early is not None else None
    if found is None:
        found = check_code(home, senses, python, cache=early.cache if early is not None else None)
    named = sources_named(config)
    found += wait_warnings(home, python, named)
    others = [n for names in grouped.values() for n in names]
    return found + (check_definitions(home, others, named) if others else [])


def _counts(result: Validation) -> dict[str, int]:
    config = result.config
    if config is None:
        return {"senses": 0, "reflexes": 0, "workflows": 0}
    disabled = sum(not s.enabled for s in config.senses.values())
    disabled += sum(not r.enabled for r in config.reflexes) + sum(not w.enabled for w in config.workflows.values())
    return {
        "senses": len(config.senses),
        "reflexes": len(config.reflexes),
        "workflows": len(config.workflows),
        "disabled": disabled,
    }


def folder_problems(home: Path, result: Validation) -> list[Problem]:
    """Files the config needs that are missing, and files the config does not know about."""
    layout, config = Layout(home), result.config
    assert config is not None
    found: list[tuple[tuple, Severity, str]] = []
    for name, sense in config.senses.items():
        if not sense.enabled:
            continue
        folder = layout.sense_dir(name)
        for part in ("sense.py", "schema.py"):
            if not (folder / part).is_file():
                found.append((("senses", name), "error", f"senses/{name}/{part} does not exist; "
                              f"create it (`nerve sense new {name}` scaffolds one) or set `enabled: false`"))
        if (folder / "schema.py").is_file() and not layout.migrations(name).is_dir() and _declares_tables(folder):
            found.append((("senses", name), "warning", f"senses/{name}/migrations/ does not exist; "
                          f"run `nerve sense migrate {name}` to generate it from schema.py"))
    for name, workflow in config.workflows.items():
        if workflow.enabled and kind_of(home, name) is None:
            found.append((("workflows", name), "error", f"workflows/{name}.py does not exist; "
                          f"create it (`nerve workflow new {name}` scaffolds one) or set `enabled: false`"))
    found += _unregistered(layout, config)
    found += _unset_secrets(config)
    found += _missing_paths(home, config)
    return [Problem(".".join(map(str, loc)), msg, sev, line_of(result.doc, loc), file=layout.config.name)
            for loc, sev, msg in found] + requirement_problems(home)


def requirement_problems(home: Path) -> list[Problem]:
    """requirements.txt lines not satisfied where the workers run (warnings: a sense that needs one fails to import)."""
    try:
        found = check(home)
    except NerveError as exc:
        return [Problem("", str(exc).split(": ", 1)[-1], "error", None, file=REQUIREMENTS)]
    return [Problem("", f"{r.text}: {r.state.replace('-', ' ')} (installed: {r.installed or 'no'}) where the workers "
                        "run; `nerve deps install` installs requirements.txt", "warning", r.line, file=REQUIREMENTS)
            for r in found if not r.ok]


def _missing_paths(home: Path, config: Any) -> list[tuple[tuple, Severity, str]]:
    """A file reflex whose folder does not exist sees nothing until it does (and the engine is restarted)."""
    out: list[tuple[tuple, Severity, str]] = []
    for i, reflex in enumerate(config.reflexes):
        for j, text in enumerate(reflex.paths):
            pattern = resolve(text, home)
            where = os.path.join(pattern.root, pattern.parts[0]) if pattern.single_file else pattern.root
            if not os.path.exists(where):
                out.append((("reflexes", i, "paths", j), "warning",
                            f"`{text}`: {where} does not exist, so nothing is watched there; create it (the "
                            "engine starts watching it at its next start or nerve.yaml reload)"))
    return out


def _declares_tables(folder: Path) -> bool:
    """Whether schema.py may declare a table (read, not imported): one with none needs no migrations/, and
    `nerve sense migrate` writes nothing for it, so a warning would never clear."""
    try:
        tree = ast.parse((folder / "schema.py").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return True  # the code check says what is wrong with it
    for node in ast.walk(tree):
        for decorator in getattr(node, "decorator_list", ()):
            called = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)) == "table":
                return True
    return False


def _unset_secrets(config: Any) -> list[tuple[tuple, Severity, str]]:
    """A webhook secret missing from this environment is likely missing from the engine's too."""
    return [(("channels", name, "secret_env"), "warning",
             f"${c.secret_env} is not set in this environment; the engine needs it in its own, or every post to "
             f"`{name}` is refused (503)")
            for name, c in config.webhook_channels().items() if c.secret_env and not os.environ.get(c.secret_env)]


def _unregistered(layout: Any, config: Any) -> list[tuple[tuple, Severity, str]]:
    out: list[tuple[tuple, Severity, str]] = []
    if layout.senses.is_dir():
        for folder in sorted(layout.senses.iterdir()):
            if (folder / "sense.py").is_file() and folder.name not in config.senses:
                out.append((("senses",), "warning", f"senses/{folder.name}/ is not in nerve.yaml, so it never runs; "
                            f"add it under `senses:` (and a reflex) to use it"))
    for file, name in unregistered(layout.home, list(config.workflows)):
        out.append((("workflows",), "warning", unregistered_message(file, name)))
    return out


def unregistered_message(file: str, name: str) -> str:
    return f"workflows/{file} is not in nerve.yaml, so it can never start; add `{name}:` under `workflows:` to use it"
