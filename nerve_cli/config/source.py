"""nerve.yaml as text: ruamel round-trip parsing (YAML 1.2), line numbers, plain data.

ruamel keeps comments, key order and flow style for edits and knows where every
key sits, which is what turns a pydantic location into `nerve.yaml:5:`. YAML 1.2
also means `off`/`yes` stay strings instead of silently becoming booleans.
"""

from __future__ import annotations

import re
from typing import Any

from nerve_cli.config.problems import Loc, Problem

_DUPLICATE = re.compile(r'found duplicate key "(.*?)"')


def make_yaml(text: str = "") -> Any:
    """A round-trip ruamel YAML that writes back in the file's own indentation."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long flow mapping the user wrote on one line
    mapping, sequence, offset = guess_indent(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) indentation used by the file; (2, 4, 2) when it shows none.

    ruamel writes with one global indentation, so edits must reuse the file's or
    every block list in it would be re-indented.
    """
    mapping = sequence = offset = None
    previous: tuple[int, str] | None = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if previous and previous[1].endswith(":"):
            step = indent - previous[0]
            if stripped.startswith("-") and sequence is None and step >= 0:
                offset, sequence = step, step + 2
            elif not stripped.startswith("-") and mapping is None and step > 0:
                mapping = step
        previous = (indent, stripped.split(" #")[0].rstrip())
        if mapping is not None and sequence is not None:
            break
    mapping = mapping or 2
    if sequence is None:
        offset, sequence = 2, mapping + 2
    return mapping, sequence, offset or 0


def parse(text: str, file: str = "nerve.yaml") -> tuple[Any, list[Problem]]:
    """The round-trip document, or None and one syntax problem with line and column."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return make_yaml(text).load(text), []
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        return None, [Problem("", _syntax_message(exc), line=line, column=column, file=file)]
    except YAMLError as exc:
        return None, [Problem("", f"not valid YAML: {exc}", file=file)]


def _syntax_message(exc: Any) -> str:
    problem = str(exc.problem or "invalid YAML")
    duplicate = _DUPLICATE.search(problem)
    if duplicate:
        return f"duplicate key `{duplicate.group(1)}`: each key may appear only once in a mapping"
    context = ""
    if exc.context:
        where = f" on line {exc.context_mark.line + 1}" if exc.context_mark else ""
        context = f" ({exc.context}{where})"
    return f"YAML syntax error: {problem}{context}"


def to_plain(node: Any) -> Any:
    """ruamel's commented containers and scalar subclasses → plain dict/list/str/int/float/bool.

    pydantic's strict types would refuse ruamel's `ScalarInt` and friends.
    """
    if isinstance(node, dict):
        return {to_plain(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    for kind in (str, int, float):
        if isinstance(node, kind):
            return kind(node)
    return node


def line_of(doc: Any, loc: Loc) -> int | None:
    """1-based line of the deepest part of `loc` present in the document."""
    node, line = doc, None
    for part in loc:
        if part == "[key]":
            continue
        try:
            if isinstance(node, dict) and part in node:
                line = node.lc.key(part)[0] + 1
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line = node.lc.item(part)[0] + 1
            else:
                break
        except (AttributeError, KeyError, TypeError):  # a node ruamel has no position for
            break
        node = node[part]
    if line is None and hasattr(doc, "lc") and doc.lc.line is not None:
        return doc.lc.line + 1
    return line
