"""The error document: what `--json` prints on stdout when a command fails (same exit code as without).

`error.type` is one of `ErrorType` (nerve_cli.errors): a closed list in each release, documented in
schemas/error.json and the docs (docs/reference/json.md), to which a version only adds.
"""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.errors import ErrorType


def error(type_: ErrorType, message: str, exit_code: int, **extra: Any) -> dict[str, Any]:
    return {"version": VERSION, "error": {"type": ErrorType(type_).value, "message": message,
                                          "exit_code": exit_code, "problems": [], **extra}}


def from_nerve_error(exc: Any) -> dict[str, Any]:
    problems = [p.to_dict() if hasattr(p, "to_dict") else {"path": "", "message": str(p), "severity": "error",
                                                             "line": None, "file": ""}
                for p in getattr(exc, "problems", None) or []]
    return error(exc.type, str(exc), exc.exit_code, problems=problems)


def from_usage_error(exc: Any) -> dict[str, Any]:
    """A Click usage error (bad option, bad choice, missing argument): exit code 2."""
    return error(ErrorType.USAGE, exc.format_message(), exc.exit_code)


def internal(exc: BaseException) -> dict[str, Any]:
    """An exception Nerve did not expect (a bug): its class and message, exit code 1."""
    return error(ErrorType.INTERNAL, f"{type(exc).__name__}: {exc}", 1)
