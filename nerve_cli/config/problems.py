"""One problem found in nerve.yaml, rendered like a compiler diagnostic.

`nerve.yaml:5: senses.cpu-usage.throttle: expected a duration like 500ms, 90s, 10m, 1h30m, 2d or 1w, got 5`
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence

Severity = Literal["error", "warning"]
Loc = tuple[Any, ...]


@dataclass(frozen=True)
class Problem:
    """A problem at a dotted key path (`reflexes[2].on`), with its 1-based line when known."""

    path: str
    message: str
    severity: Severity = "error"
    line: int | None = None
    column: int | None = None
    file: str = "nerve.yaml"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def where(self) -> str:
        """`nerve.yaml:5` or `nerve.yaml:4:7` (syntax errors carry a column)."""
        out = self.file
        if self.line is not None:
            out += f":{self.line}"
            if self.column is not None:
                out += f":{self.column}"
        return out

    def __str__(self) -> str:
        parts = [self.where()]
        if self.severity != "error":
            parts.append(self.severity)
        if self.path:
            parts.append(self.path)
        return ": ".join(parts) + f": {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `nerve config check --json`: path, message, severity, line, file."""
        data = asdict(self)
        return {key: data[key] for key in ("path", "message", "severity", "line", "file")}


def key_path(loc: Loc, data: Any = None) -> str:
    """('reflexes', 2, 'on', 0) → `reflexes[2].on[0]`; ('senses', 'cpu', 'throttle') → `senses.cpu.throttle`.

    Indexes are written `[i]` only where `data` holds a list at that point, so a
    mapping key that happens to be an int still reads as a key.
    """
    out = ""
    node = data
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the key itself" (a bad name)
            continue
        if isinstance(node, list) or (node is None and isinstance(part, int)):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        node = _child(node, part)
    return out


def _child(node: Any, part: Any) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def errors_of(problems: Sequence[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_error]


def count_words(problems: Sequence[Problem]) -> str:
    """'2 errors, 1 warning' (either part left out when zero)."""
    errors = len(errors_of(problems))
    warnings = len(problems) - errors
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    return ", ".join(parts) or "no problems"
