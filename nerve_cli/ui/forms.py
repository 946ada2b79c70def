"""An answer's form from its question's JSON Schema, and the answer read back from the form.

An object schema whose properties are plain (a string, an enum, a number, an
integer, a boolean) becomes one input per property (`a.NAME`: a select for an
enum, a number box, a checkbox); anything else is one JSON text area
(`answer`). The answer path checks the result against the schema either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from nerve_cli.automaton.model import NO_ANSWER

PLAIN = ("string", "number", "integer", "boolean")
FIELD = "a."


def form_fields(schema: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """[{"name", "kind": enum|number|integer|boolean|string, "options", "required", "title"}], or None: the
    schema needs the JSON text area."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return None
    required = set(schema.get("required") or [])
    out = []
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            return None
        if isinstance(prop.get("enum"), list) and all(isinstance(v, (str, int, float)) for v in prop["enum"]):
            kind = "enum"
        elif prop.get("type") in PLAIN:
            kind = str(prop["type"])
        else:
            return None
        out.append({"name": str(name), "kind": kind, "options": list(prop.get("enum") or []),
                    "required": name in required, "title": str(prop.get("title") or prop.get("description") or name)})
    return out


def read_answer(form: Mapping[str, str]) -> Any:
    """The structured answer a form carries (NO_ANSWER when it carries none); ValueError for text that does
    not read as its field's type."""
    fields = {k[len(FIELD):]: v for k, v in form.items() if k.startswith(FIELD)}
    kinds = {k[len("kind."):]: v for k, v in form.items() if k.startswith("kind.")}
    if kinds:
        out: dict[str, Any] = {}
        for name, kind in kinds.items():
            text = fields.get(name, "")
            if kind == "boolean":
                out[name] = text in ("on", "true", "1")
            elif text == "":
                continue  # left empty: absent (the schema says whether it may be)
            elif kind in ("number", "integer"):
                try:
                    out[name] = int(text) if kind == "integer" else float(text)
                except ValueError:
                    raise ValueError(f"{name} must be a {kind}, got {text!r}") from None
            elif kind == "enum":  # each option is sent as its JSON, so 2 stays a number and "2" a string
                try:
                    out[name] = orjson.loads(text)
                except orjson.JSONDecodeError:
                    out[name] = text
            else:
                out[name] = text
        return out
    text = (form.get("answer") or "").strip()
    if not text:
        return NO_ANSWER
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON: {exc}") from None

