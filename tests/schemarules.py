"""The rules every shipped JSON Schema follows, as code: `normal_form` writes them, `strict` closes them for our tests.

The shipped schemas (nerve_cli/contract/schemas/) are what clients pin, so they are *open* where the
docs (reference/json.md) say a version may grow:
- objects accept fields they do not list (no `additionalProperties: false`);
- an enumeration (`status`, `kind`, `error.type`...) lists today's values and accepts a new string:
  `{"anyOf": [{"type": "string", "enum": [...]}, {"type": "string"}]}`.
And they are portable (what MCP clients' strict checks ask):
- every value is typed: nullable as `anyOf: [{type: X, ...}, {type: null}]`, never `type: [X, "null"]`;
  user data (a payload, meta) as any JSON value, spelled out as an anyOf of the six JSON types;
- a point in time `<x>` beside `<x>_ms` is `format: date-time`.

Our own output is held tighter: `strict(schema)` closes every object that lists its properties and every
open enumeration, so a field we print but did not document, or a value not listed, fails the tests.

Run `python tests/schemarules.py --fix` to rewrite the shipped schemas in their normal form (a schema
written by hand in the old style, with `type: [X, "null"]` or `additionalProperties: false`, is put right).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "nerve_cli" / "contract" / "schemas"
JSON_TYPES = ("object", "array", "string", "number", "boolean", "null")
ANY_JSON: dict[str, Any] = {"anyOf": [{"type": t} for t in JSON_TYPES]}
# keywords that describe the value as a whole; every other keyword constrains the non-null branch
OUTER = ("title", "description", "default", "examples", "$schema", "$id", "deprecated")
COMBINED = ("anyOf", "oneOf", "allOf")


def normal_form(schema: Any) -> Any:
    """The schema with the rules above applied (idempotent)."""
    out = _normal(copy.deepcopy(schema))
    if isinstance(out, dict) and out.get("description") == "":
        del out["description"]
    return out


def _normal(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    node = {key: _children(key, value) for key, value in node.items()}
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    if "const" in node and "type" not in node:
        node["type"] = _type_of(node["const"])
    if "properties" in node:
        props = node["properties"]
        for name, prop in list(props.items()):
            if f"{name}_ms" in props:
                props[name] = _with_format(prop)
            if prop == {} or _untyped(prop):
                props[name] = {**{k: v for k, v in prop.items() if k in OUTER}, **copy.deepcopy(ANY_JSON)}
            props[name] = _open_enum(props[name])
    if node.get("type") == "array" and "items" not in node:
        node["items"] = copy.deepcopy(ANY_JSON)
    if isinstance(node.get("items"), dict) and _untyped(node["items"]):
        node["items"] = {**node["items"], **copy.deepcopy(ANY_JSON)}
    types = node.get("type")
    if isinstance(types, list):
        outer = {k: v for k, v in node.items() if k in OUTER}
        inner = {k: v for k, v in node.items() if k not in OUTER and k != "type"}
        branches = [{"type": t, **inner} if t != "null" else {"type": "null"} for t in types]
        branches = [_open_enum_branch(b) for b in branches]
        node = {**outer, "anyOf": _flatten(branches)}
    return node


def _open_enum(node: Any) -> Any:
    """`{"enum": ["a", "b"]}` → `{"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "string"}]}`
    (and a `{"type": "null"}` branch when null is one of the values)."""
    if not (isinstance(node, dict) and "enum" in node and node["enum"]
            and all(isinstance(v, str) or v is None for v in node["enum"])):
        return node
    outer = {k: v for k, v in node.items() if k in OUTER}
    inner = {k: v for k, v in node.items() if k not in OUTER and k != "type"}
    nullable = None in inner["enum"]
    inner["enum"] = [v for v in inner["enum"] if v is not None]
    return {**outer, "anyOf": [{"type": "string", **inner}, {"type": "string"}, *([{"type": "null"}] if nullable else [])]}


def _children(key: str, value: Any) -> Any:
    if key in ("properties", "$defs", "patternProperties"):
        return {name: _normal(sub) for name, sub in value.items()}
    if key in COMBINED:  # a bare {"type": "array"} branch is any JSON value's: its items are any value
        return [sub if sub == {"type": "array"} else _normal(sub) for sub in value]
    if key in ("items", "additionalProperties", "not", "contains"):
        return _normal(value)
    return value


def _open_enum_branch(branch: dict[str, Any]) -> Any:
    """An enumeration in a nullable value's string branch is opened as a standalone one is."""
    if "enum" in branch and branch.get("type") == "string":
        return [branch, {"type": "string"}]
    return branch


def _flatten(branches: list[Any]) -> list[Any]:
    out: list[Any] = []
    for b in branches:
        out.extend(b if isinstance(b, list) else [b])
    return out


def _untyped(node: Any) -> bool:
    return isinstance(node, dict) and not any(k in node for k in ("type", "enum", "const", "$ref", *COMBINED))


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", type(None): "null", list: "array", dict: "object"}[type(value)]


def _with_format(prop: dict[str, Any]) -> dict[str, Any]:
    """`format: date-time` on the string (branch) of a point in time."""
    prop = copy.deepcopy(prop)
    if prop.get("type") == "string" or (isinstance(prop.get("type"), list) and "string" in prop["type"]):
        prop["format"] = "date-time"
    for branch in prop.get("anyOf", []):
        if branch.get("type") == "string":
            branch["format"] = "date-time"
    return prop


def strict(schema: Any) -> Any:
    """The schema closed for our own output: objects refuse unlisted fields, enumerations unlisted values."""
    node = copy.deepcopy(schema)
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {key: (strict(value) if key not in ("enum", "const", "required", "examples") else value)
            for key, value in node.items()}
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if "anyOf" in node:
        enums = [b for b in node["anyOf"] if isinstance(b, dict) and "enum" in b]
        if enums:  # an open enumeration: drop the branch taking any string
            node["anyOf"] = [b for b in node["anyOf"] if b != {"type": "string"}]
    return node


def opened(schema: Any) -> Any:
    """A schema as a client reads it under the docs' promise: fields may be added, enumerations may grow.

    Applied to the schemas as they were at the version bump, which were written closed."""
    node = copy.deepcopy(schema)
    if isinstance(node, list):
        return [opened(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {key: (opened(value) if key not in ("enum", "const", "required", "examples") else value)
            for key, value in node.items()}
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    if "enum" in node and all(isinstance(v, str) for v in node["enum"]):
        del node["enum"]
        node.setdefault("type", "string")
    return node


def problems(schema: Any, where: str = "") -> list[str]:
    """What keeps a schema from its normal form, as `path: what` lines (empty when it is normal)."""
    found: list[str] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            found += problems(item, f"{where}[{i}]")
        return found
    if not isinstance(schema, dict):
        return found
    if schema.get("additionalProperties") is False:
        found.append(f"{where}: additionalProperties false (schemas are open to additive fields)")
    if isinstance(schema.get("type"), list):
        found.append(f"{where}: type {schema['type']} (nullable is anyOf: [{{type: X}}, {{type: null}}])")
    for name, prop in (schema.get("properties") or {}).items():
        if _untyped(prop):
            found.append(f"{where}.{name}: untyped (give it a type, or any JSON value as an anyOf of the six)")
        if f"{name}_ms" in schema["properties"] and not _has_format(prop):
            found.append(f"{where}.{name}: a point in time without format: date-time")
        if isinstance(prop, dict) and "enum" in prop:
            found.append(f"{where}.{name}: a closed enum (open it: anyOf [{{type: string, enum}}, {{type: string}}])")
    for key in ("properties", "$defs"):
        for name, sub in (schema.get(key) or {}).items():
            found += problems(sub, f"{where}.{name}")
    for key in COMBINED:
        for i, sub in enumerate(schema.get(key) or []):
            found += problems(sub, f"{where}/{key}[{i}]")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += problems(schema[key], f"{where}[]" if key == "items" else f"{where}{{}}")
    return found


def _has_format(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    if prop.get("format") == "date-time":
        return True
    return any(b.get("format") == "date-time" for b in prop.get("anyOf", []) if b.get("type") == "string")


def fix() -> list[Path]:
    """Rewrite every shipped schema in its normal form; returns the files changed."""
    changed = []
    for path in sorted(SCHEMAS.glob("*.json")):
        before = json.loads(path.read_text(encoding="utf-8"))
        after = normal_form(before)
        if after != before:
            path.write_text(json.dumps(after, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            changed.append(path)
    return changed


if __name__ == "__main__":
    if sys.argv[1:] == ["--fix"]:
        for path in fix():
            print(f"rewrote {path}")
    else:
        sys.exit("usage: python tests/schemarules.py --fix")
