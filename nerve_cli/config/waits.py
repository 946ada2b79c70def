"""The `wait_for_event("source", match)` calls a workflow file's text makes, read without importing it.

The mesh draws them, the check warns about a misspelt source, and nerve.yaml's
channel check counts a channel a workflow waits on as listened to. Only
literal sources are seen (a computed one is not).
"""

from __future__ import annotations

import ast
from pathlib import Path


def wait_call(node: ast.AST) -> tuple[str, tuple[str, ...]] | None:
    """(source, match keys) when `node` is a `wait_for_event` call with a literal source, else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    first = node.args[0]
    if called != "wait_for_event" or not isinstance(first, ast.Constant) or not isinstance(first.value, str):
        return None
    match = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "match"), None)
    keys = tuple(str(k.value) for k in match.keys if isinstance(k, ast.Constant)) if isinstance(match, ast.Dict) else ()
    return first.value, keys


def waited_sources(files: list[Path]) -> set[str]:
    """Every literal source these workflow files wait for (a file that does not parse waits for nothing)."""
    found: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        found.update(call[0] for node in ast.walk(tree) if (call := wait_call(node)) is not None)
    return found
