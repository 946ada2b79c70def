"""`nerve mcp` passes the checks a strict MCP client makes (MCP Inspector's `--strict`), for EVERY tool it lists.

A tool added later is held to the same rules without a line here: a version in serverInfo; each tool with a
title and a description; every input property described and typed (nullable as anyOf, never `type: [X,
"null"]`, no untyped `{}`); numbers bounded where the code bounds them; the output schema in the contract's
normal form; an unknown tool answered with the error document.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import schemarules
from enginekit import write_instance

from nerve_cli import __version__
from nerve_cli.mcp.server import build

BOUNDED = {"limit", "max_rows", "timeout_s"}  # what the tools clamp: the bound belongs in the schema


def portability(schema: Any, where: str) -> list[str]:
    """Type arrays and untyped values anywhere in a schema (what strict clients warn about)."""
    found: list[str] = []
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            found.append(f"{where}: type {schema['type']}: nullable is anyOf")
        for name, prop in (schema.get("properties") or {}).items():
            if prop is True or prop == {} or schemarules._untyped(prop):
                found.append(f"{where}.{name}: untyped")
        if schema.get("type") == "array" and schema.get("items") in ({}, True):
            found.append(f"{where}: an array of untyped items (leave items out for any JSON value)")
        for key, value in schema.items():
            if key not in ("enum", "const", "default", "examples", "required"):
                found += portability(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            found += portability(item, f"{where}[{i}]")
    return found


def strict_warnings(tool: Any) -> list[str]:
    name, found = tool.name, []
    if not tool.title:
        found.append(f"{name}: no title")
    if not tool.description:
        found.append(f"{name}: no description")
    found += portability(tool.input_schema, f"{name}.input")
    for prop, spec in (tool.input_schema.get("properties") or {}).items():
        if not spec.get("description"):
            found.append(f"{name}.input.{prop}: no description")
        if prop in BOUNDED and not ("maximum" in spec and ("minimum" in spec or "exclusiveMinimum" in spec)):
            found.append(f"{name}.input.{prop}: its limits are not in the schema")
    hints = tool.annotations
    for hint in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
        if hints is None or getattr(hints, hint) is None:
            found.append(f"{name}: no {hint} (a client asks its user from these)")
    if tool.output_schema is None:
        found.append(f"{name}: no output schema")
    else:
        found += portability(tool.output_schema, f"{name}.output")
        found += [f"{name}.output{p}" for p in schemarules.problems(tool.output_schema)]
    return found


def test_every_tool_passes_the_strict_checks_and_an_unknown_tool_is_an_error_document(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    app = build(home)

    async def main() -> tuple[list[Any], Any, Any, Any]:
        tools = await app.list_tools()
        unknown = await app.call_tool("no_such_tool", {})
        too_many = await app.call_tool("query_logs", {"limit": 5000})
        return tools, unknown, too_many, app._lowlevel_server.create_initialization_options()

    tools, unknown, too_many, init = asyncio.run(main())
    assert init.server_version == __version__ and init.server_name == "nerve"
    assert len(tools) >= 12
    warnings = [w for tool in tools for w in strict_warnings(tool)]
    assert warnings == [], "\n".join(warnings)
    assert unknown.is_error
    error = json.loads(unknown.content[0].text)["error"]
    assert (error["type"], error["exit_code"]) == ("usage", 2) and "no tool 'no_such_tool'" in error["message"]
    assert "list_senses" in error["message"]
    refused = json.loads(too_many.content[0].text)["error"]
    assert too_many.is_error and refused["type"] == "usage" and "limit" in refused["message"]


def test_the_hints_say_what_a_call_can_do(home: Path) -> None:
    """migrate_sense declared destructiveHint false though it can drop a table; no tool said idempotentHint."""
    write_instance(home, "senses: {}\n", {})
    tools = {t.name: t.annotations for t in asyncio.run(build(home).list_tools())}
    assert tools["migrate_sense"].destructive_hint and tools["migrate_sense"].idempotent_hint
    assert tools["cancel_thread"].destructive_hint and not tools["cancel_thread"].idempotent_hint
    assert tools["write_sense_file"].idempotent_hint and tools["enable_sense"].idempotent_hint
    assert not tools["emit"].idempotent_hint and not tools["start_thread"].idempotent_hint
    assert all(a.idempotent_hint for a in tools.values() if a.read_only_hint)
