"""The JSON Schema of each document, shipped in this package (`schemas/<kind>.json`).

`nerve mcp` hands them to clients as its tools' output schemas; the contract
tests validate every `--json` output and every MCP tool's answer against them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

CLI_KINDS = (
    "agent-ack", "agent-delivery", "agent-install", "agent-list", "archive", "backup", "config-check", "delete",
    "deps", "doctor", "emit", "error", "fleet", "gc", "lifecycle", "log", "mesh", "migrate", "rename", "replay",
    "sense-chart", "sense-compute", "sense-dry-run", "sense-list", "sense-new", "sense-pause", "sense-show",
    "service", "status", "thread-answer", "thread-cancel", "thread-link", "thread-list", "thread-pause",
    "thread-rerun", "thread-show", "workflow-check", "workflow-list", "workflow-run",
)
# answered only by `nerve mcp`'s tools (query_sense, query_logs, start_thread, write_sense_file): no command
# prints them
MCP_KINDS = ("log-list", "sense-file", "sense-query", "thread-start")
KINDS = CLI_KINDS + MCP_KINDS


@lru_cache(maxsize=None)
def schema(kind: str) -> dict[str, Any]:
    if kind not in KINDS:
        raise KeyError(f"no document kind {kind!r}; known: {', '.join(KINDS)}")
    text = resources.files("nerve_cli.contract").joinpath("schemas", f"{kind}.json").read_text(encoding="utf-8")
    return json.loads(text)
