"""The JSON Schema of each document, shipped in this package (`schemas/<kind>.json`).

`nerve mcp` can hand them to clients as tool output schemas; the contract
test validates every `--json` output against them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

KINDS = (
    "archive", "backup", "config-check", "delete", "deps", "doctor", "emit", "error", "gc", "lifecycle", "log",
    "mesh", "rename", "sense-chart", "sense-compute", "sense-list", "sense-show", "service", "status",
    "thread-answer", "thread-list", "thread-show", "workflow-list", "workflow-run",
)


@lru_cache(maxsize=None)
def schema(kind: str) -> dict[str, Any]:
    if kind not in KINDS:
        raise KeyError(f"no document kind {kind!r}; known: {', '.join(KINDS)}")
    text = resources.files("nerve_cli.contract").joinpath("schemas", f"{kind}.json").read_text(encoding="utf-8")
    return json.loads(text)
