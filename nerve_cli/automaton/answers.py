"""Structured answers: a question may declare the JSON Schema its answer must match.

`ask_person(question, schema={...})` checks the schema when the role asks (a
broken schema fails the role, not the person answering later); `nerve thread
approve|reject --answer JSON` (the control socket, MCP, `nerve top`) is checked
against it before anything is written, every problem listed at once. The
answer reaches the moderator as data, in the person's message meta (`answer`).
jsonschema is imported only when a schema is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

MAX_PROBLEMS = 20  # problems listed in one refusal


def check_schema(schema: Any) -> dict[str, Any]:
    """The schema as plain JSON; ValueError naming what is wrong with it (JSON Schema draft 2020-12)."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"ask_person(schema=...) must be a JSON Schema (a dict), got {type(schema).__name__}")
    try:
        plain = orjson.loads(orjson.dumps(dict(schema)))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ValueError(f"ask_person(schema=...) must be JSON: {exc}") from None
    import jsonschema  # only a question with a schema pays for it

    try:
        jsonschema.Draft202012Validator.check_schema(plain)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"ask_person(schema=...) is not a valid JSON Schema: {exc.message}"
                         f"{_where(exc.absolute_path)}") from None
    return plain


def answer_problems(schema: Mapping[str, Any], answer: Any) -> list[str]:
    """Every way `answer` fails `schema` ([] when it matches), each with where in the answer it is."""
    import jsonschema  # only an answer to a question with a schema pays for it

    validator = jsonschema.Draft202012Validator(dict(schema))
    errors = sorted(validator.iter_errors(answer), key=lambda e: list(map(str, e.absolute_path)))
    out = [f"{e.message}{_where(e.absolute_path)}" for e in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        out.append(f"and {len(errors) - MAX_PROBLEMS} more")
    return out


def _where(path: Any) -> str:
    parts = list(path)
    if not parts:
        return ""
    return " (at " + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".") + ")"
