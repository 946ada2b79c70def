"""The error document: what `--json` prints on stdout when a command fails (same exit code as without)."""

from __future__ import annotations

import re
from typing import Any

from nerve_cli.contract import VERSION


def error(type_: str, message: str, exit_code: int, **extra: Any) -> dict[str, Any]:
    return {"version": VERSION, "error": {"type": type_, "message": message, "exit_code": exit_code,
                                          "problems": [], **extra}}


def type_name(exc: BaseException) -> str:
    """`EngineNotRunning` → `engine_not_running`; the base NerveError is plain `error`."""
    name = type(exc).__name__
    if name == "NerveError":
        return "error"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def from_nerve_error(exc: Any) -> dict[str, Any]:
    problems = [p.to_dict() if hasattr(p, "to_dict") else {"path": "", "message": str(p), "severity": "error",
                                                             "line": None, "file": ""}
                for p in getattr(exc, "problems", None) or []]
    return error(type_name(exc), str(exc), exc.exit_code, problems=problems)


def from_usage_error(exc: Any) -> dict[str, Any]:
    """A Click usage error (bad option, bad choice, missing argument): exit code 2."""
    return error("usage", exc.format_message(), exc.exit_code)
