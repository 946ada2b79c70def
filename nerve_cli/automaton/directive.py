"""The sense `workflow` directive: `name|maxRounds|prompt`, the one way a sense launches a thread.

A sense returns `SenseResult(payload, workflow="cleanup|5|disk is 95% full")`;
the kernel parses the directive, caps the rounds at engine.max_rounds and
starts a thread. The prompt may itself contain '|'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nerve_cli.errors import WorkflowError
from nerve_cli.names import NAME_MAX, NAME_RE

T = TypeVar("T")


@dataclass(frozen=True)
class SenseResult(Generic[T]):
    """What a compute may return instead of a bare value to also launch a workflow thread."""

    payload: T
    workflow: str | None = None


@dataclass(frozen=True)
class Directive:
    workflow: str
    max_rounds: int
    prompt: str


def directive(workflow: str, max_rounds: int, prompt: str) -> str:
    """Build a directive string; validates as parse_directive would."""
    text = f"{workflow}|{max_rounds}|{prompt}"
    parse_directive(text)
    return text


def parse_directive(text: Any) -> Directive:
    """Parse and validate `name|maxRounds|prompt`; raises WorkflowError saying what is wrong."""
    if not isinstance(text, str):
        raise WorkflowError(f"workflow directive must be a string 'name|maxRounds|prompt', got {type(text).__name__}")
    parts = text.split("|", 2)
    if len(parts) < 3:
        raise WorkflowError(
            f"workflow directive {text[:80]!r} must have three '|'-separated parts: 'name|maxRounds|prompt'"
        )
    name, rounds, prompt = parts
    if not NAME_RE.match(name) or len(name) > NAME_MAX:
        raise WorkflowError(f"workflow directive names {name!r}, which is not a valid workflow name")
    if not rounds.strip().isdigit() or int(rounds) < 1:
        raise WorkflowError(f"workflow directive {text[:80]!r}: maxRounds must be a whole number ≥ 1, got {rounds!r}")
    if not prompt.strip():
        raise WorkflowError(f"workflow directive {text[:80]!r}: the prompt is empty")
    return Directive(name, int(rounds), prompt)
