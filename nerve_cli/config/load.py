"""Read and validate nerve.yaml like a compiler: every problem at once, with key path and line.

`validate_text` never raises for a bad file: it returns the problems. `load_config`
raises `ConfigError` carrying all of them, so a caller never half-loads a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nerve_cli.config import rules
from nerve_cli.config.agents import heard_channels
from nerve_cli.config.messages import message_for
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.patterns import Pattern, check_patterns
from nerve_cli.config.problems import Problem, count_words, errors_of, key_path
from nerve_cli.config.rules import Channel
from nerve_cli.config.source import TooLarge, line_of, parse, parse_for_reading, read_text, to_plain
from nerve_cli.errors import ConfigError, InstanceNotFound
from nerve_cli.home import Layout

SECTIONS = tuple(NerveConfig.model_fields)  # engine, groups, senses, reflexes, workflows (the model decides)


@dataclass
class Validation:
    """Everything one validation pass learned about a file."""

    config: NerveConfig | None
    problems: list[Problem] = field(default_factory=list)
    channels: list[Channel] = field(default_factory=list)
    data: Any = None  # the plain parsed data (for cross-checks against the folder)
    doc: Any = None  # the parsed document, for line numbers (ruamel's, with comments, when validated for an edit)
    patterns: list[Pattern] = field(default_factory=list)  # `on:` patterns and what each matches today

    @property
    def valid(self) -> bool:
        return not errors_of(self.problems)


def validate_text(text: str, path: str | Path = "nerve.yaml") -> tuple[NerveConfig | None, list[Problem]]:
    """(config, problems); config is None when any problem is an error."""
    result = validate(text, path)
    return result.config, result.problems


def validate(text: str, path: str | Path = "nerve.yaml", home: Path | None = None, *,
             for_edit: bool = False) -> Validation:
    """Full validation: syntax, shape (pydantic), references between sections, channels.

    `home` (the instance folder, when known) lets path patterns be checked against its data/ folder. `for_edit`:
    `doc` is ruamel's round-trip document, with its comments (an edit's); else it has only values and lines."""
    file = Path(path).name
    doc, problems = parse(text, file) if for_edit else parse_for_reading(text, file)
    if problems:
        return Validation(None, problems)
    try:
        data = to_plain(doc)
    except TooLarge as exc:
        return Validation(None, [Problem("", str(exc), line=1, file=file)])
    if data is None:  # an empty file (or only comments) is a valid, empty config
        return Validation(NerveConfig(), data={}, doc=doc)
    if not isinstance(data, dict):
        kind = type(data).__name__
        message = f"the top level must be a mapping with keys {', '.join(SECTIONS)}; got a {kind}"
        return Validation(None, [Problem("", message, line=1, file=file)], data=data, doc=doc)
    return _validate_mapping(data, doc, file, home)


def _validate_mapping(data: dict, doc: Any, file: str, home: Path | None = None) -> Validation:
    findings, channels = rules.check_all(data, home)
    senses = data.get("senses")
    named = {c.name for c in channels} | heard_channels(data)
    found, patterns = check_patterns(data, senses if isinstance(senses, dict) else {}, named, home)
    findings += found
    skip = rules.workflow_kind_reflexes(data)  # one clear error each (no such reflex kind), nothing more
    config = None
    try:
        config = NerveConfig.model_validate(_normalized(data, skip))
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            findings.append((tuple(error["loc"]), "error", message_for(error)))
    problems = [
        Problem(key_path(loc, data), message, severity, line_of(doc, loc), file=file)
        for loc, severity, message in findings
    ]
    problems = _deduplicated(problems)
    problems.sort(key=lambda p: (p.line or 0, p.path))
    if errors_of(problems):
        config = None
    return Validation(config, problems, channels, data, doc, patterns)


def _normalized(data: dict, skip: set[int]) -> dict:
    """An empty section (`senses:` with only comments under it) means "none", not null.

    Same for a sense or workflow with no settings (`cpu-usage:`): all defaults.
    Workflow-kind reflexes are replaced by a stub so pydantic adds nothing to their one error.
    """
    out = {k: v for k, v in data.items() if not (k in SECTIONS and v is None)}
    for section in ("groups", "senses", "workflows", "channels"):  # name → settings sections
        if isinstance(out.get(section), dict):
            out[section] = {k: ({} if v is None else v) for k, v in out[section].items()}
    if skip and isinstance(out.get("reflexes"), list):
        out["reflexes"] = [
            {"sense": "workflow-kind", "interval": "1s"} if i in skip else r for i, r in enumerate(out["reflexes"])
        ]
    return out


def _deduplicated(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    out = []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            out.append(p)
    return out


def validate_file(path: Path) -> Validation:
    """Validate a nerve.yaml on disk (it must exist); a file too large or not UTF-8 is one problem."""
    text, problems = read_text(path)
    if text is None:
        return Validation(None, problems)
    return validate(text, path, Path(path).resolve().parent)


def read_config(path: Path) -> str:
    """nerve.yaml's text for an edit; ConfigError when it is too large or not UTF-8."""
    text, problems = read_text(path)
    if text is None:
        raise ConfigError(f"{path} cannot be read as a config; fix it first (`nerve config check`)", problems)
    return text


def config_path(home: Path) -> Path:
    path = Layout(Path(home)).config
    if not path.is_file():
        raise InstanceNotFound(
            f"no Nerve instance at {home}: there is no nerve.yaml there. Run `nerve init --home {home}` to create one."
        )
    return path


def load_config(home: Path) -> NerveConfig:
    """The validated config of the instance at `home`; ConfigError lists every problem."""
    return load_config_and_warnings(home)[0]


def load_config_and_warnings(home: Path) -> tuple[NerveConfig, list[Problem]]:
    """As `load_config`, plus the warnings (e.g. a channel that looks like a misspelt sense) for the engine to show."""
    path = config_path(home)
    result = validate_file(path)
    if result.config is None:
        raise ConfigError(f"{path} is invalid ({count_words(result.problems)}); nothing was loaded", result.problems)
    return result.config, [p for p in result.problems if p.severity == "warning"]
