"""The JSON contract's checks, shared by the CLI's contract test and the MCP server's tests.

A document is valid when it matches its shipped JSON Schema (nerve_cli/contract/schemas/<kind>.json),
closed for our own output (`schemarules.strict`: a field we print must be documented, every documented
one is required, an enumeration's value must be listed), carries the contract's version, follows the
naming rule for time, and still matches the schema of its kind as it was when version 1 began
(tests/contract_v1/, read as the docs promise: fields may be added, enumerations may grow). Every
`--json` output and every `nerve mcp` tool answer goes through `Checked.doc`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
from schemarules import opened, strict

from nerve_cli.contract import VERSION
from nerve_cli.contract.schema import schema

PINNED = Path(__file__).resolve().parent / "contract_v1"  # the schemas as they were when version 1 began
# What changed within version 1 that is more than an addition, each documented in docs/changelog.md
PINNED_EXCEPTIONS: dict[str, dict[str, Any]] = {
    "log": {"id": {"type": ["integer", "null"]}},  # null for a `--signals` row
}
# ... and inside an object: (kind, object) → {field: its schema now}
PINNED_NESTED: dict[tuple[str, str], dict[str, Any]] = {
    # `nerve status --json` with the engine stopped: a status document (before, the error document)
    ("status", "engine"): {"pid": {"type": ["integer", "null"]}, "uptime_s": {"type": ["number", "null"]}},
}


@lru_cache(maxsize=None)
def pinned(kind: str) -> dict[str, Any] | None:
    """The kind's schema at the version bump, opened as the docs promise; None for a kind born later."""
    path = PINNED / f"{kind}.json"
    if not path.exists():
        return None
    old = opened(json.loads(path.read_text(encoding="utf-8")))
    for field, replacement in PINNED_EXCEPTIONS.get(kind, {}).items():
        old["properties"][field] = replacement
    for (of_kind, within), fields in PINNED_NESTED.items():
        if of_kind == kind:
            old["properties"][within]["properties"].update(fields)
    return old


@lru_cache(maxsize=None)
def closed(kind: str) -> dict[str, Any]:
    return strict(schema(kind))

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
OPAQUE = {"payload", "last_payload", "meta", "detail", "origin", "workflow_runs", "logs", "error", "config",
          "newest"}  # user data, not ours


def naming_problems(doc: Any, where: str = "") -> list[str]:
    """Points in time are `<x>_ms` (int) beside `<x>` (ISO UTC), durations `<x>_s`; no other time names."""
    found: list[str] = []
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            found += naming_problems(item, f"{where}[{i}]")
    elif isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{where}.{key}"
            if key in ("ts", "timestamp") or key.endswith("_at") or key.endswith("_ts"):
                found.append(f"{path}: a time must be named <x>_ms and <x>")
            if key.endswith("_ms"):
                partner = key[:-3]
                if partner not in doc:
                    found.append(f"{path}: no `{partner}` beside it")
                elif value is None:
                    if doc[partner] is not None:
                        found.append(f"{path} is null but {partner} is not")
                elif not (isinstance(value, int) and isinstance(doc[partner], str) and ISO.match(doc[partner])):
                    found.append(f"{path}={value!r} / {partner}={doc[partner]!r}: not int ms + ISO UTC")
            if key not in OPAQUE:
                found += naming_problems(value, path)
    return found


class Checked:
    """Validates documents as they come; remembers what was seen to show nothing was skipped."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()

    def doc(self, kind: str, doc: Any, what: str) -> Any:
        for against, where in ((closed(kind), f"schemas/{kind}.json (closed for our own output)"),
                               (schema(kind), f"schemas/{kind}.json as shipped"),
                               (pinned(kind), f"tests/contract_v1/{kind}.json (version 1 as first published)")):
            if against is None:
                continue
            try:
                jsonschema.Draft202012Validator(against).validate(doc)
            except jsonschema.ValidationError as exc:
                raise AssertionError(f"`{what}` does not match {where}: {exc.message} at "
                                     f"{'/'.join(map(str, exc.absolute_path))}\n{json.dumps(doc, indent=1)[:3000]}") from None
        assert doc["version"] == VERSION
        problems = naming_problems(doc)
        assert not problems, f"`{what}`: {problems}"
        self.kinds.add(kind)
        return doc
