"""nerve.yaml read for validation by libyaml (PyYAML's C parser), where ruamel's pure-Python reader is slow.

ruamel reads YAML at roughly 6 µs a character: 320 ms for the 52 KB nerve.yaml
of 1,000 senses, paid by `nerve config check` and by the engine at every save
of the file. libyaml composes the same file in 10 ms. Validation needs no
comments and no round trip, only the values and the line of every key and
item, so it reads here; editing (`config.edit`, `config.lifecycle`) still goes
through ruamel, which keeps comments and layout.

The values must be exactly those ruamel gives, so this module does only what it
can do the same way, and answers None for everything else, for ruamel to read
(`config.source.parse_for_reading`): a syntax error (ruamel's message and
line are the ones the user sees), a `%YAML` directive, a NEL, LS or PS character (a line break
to libyaml's YAML 1.1, text to 1.2), an explicit tag, a merge
key (`<<`), a timestamp, a duplicate key, a key that is a list or mapping,
nesting past `MAX_DEPTH`. Plain scalars are resolved by YAML 1.2's core schema as ruamel implements it
(its regular expressions, copied below: tests/test_config_fastread.py holds
them equal to ruamel's, value by value), not by PyYAML's YAML 1.1 rules, so
`off` and `yes` stay strings.
"""

from __future__ import annotations

import functools
import re
from typing import Any

MAX_DEPTH = 32  # as config.source: deeper is ruamel's to report
_BREAKS_OF_1_1 = re.compile("[\x85\u2028\u2029]")
_PLAIN = "!nerve-plain"  # the tag given to a plain scalar here, resolved below
_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class Unsure(Exception):
    """Something this reader does not do as ruamel does: ruamel reads the file instead."""


class Lines:
    """The lines (0-based) of a mapping's keys or a list's items, read as ruamel's `lc` is (config.source.line_of)."""

    __slots__ = ("line", "_at")

    def __init__(self, line: int) -> None:
        self.line = line
        self._at: dict[Any, int] = {}

    def key(self, key: Any) -> tuple[int, int]:
        return self._at[key], 0

    def item(self, index: int) -> tuple[int, int]:
        return self._at[index], 0


class PosMap(dict):
    """A mapping read from the file, with the line of each key."""

    lc: Lines


class PosList(list):
    """A list read from the file, with the line of each item."""

    lc: Lines


def compose(text: str) -> Any:
    """libyaml's node graph of the text (None for a document of only comments); raises `Unsure` where ruamel
    must read it. Nothing is built yet: `config.source` bounds what aliases expand to first, then `build`."""
    if "%YAML" in text:  # a version directive changes how scalars resolve (1.1): ruamel's
        raise Unsure("a %YAML directive")
    if _BREAKS_OF_1_1.search(text):  # line breaks to libyaml (YAML 1.1), not to YAML 1.2 (nor quite to ruamel)
        raise Unsure("NEL, LS or PS")
    composer = _composer()(text)
    try:
        return composer.get_single_node()
    except Exception as exc:  # a syntax error, or anything libyaml would not take: ruamel says what it is
        raise Unsure(str(exc)) from exc
    finally:
        composer.dispose()


@functools.cache
def _composer() -> type:
    """libyaml's parser and composer, with no resolution of its own (plain scalars are tagged `_PLAIN`)."""
    try:
        from yaml.cyaml import CParser  # PyYAML's libyaml binding (~5 ms: only where nerve.yaml is validated)
        from yaml.nodes import ScalarNode
        from yaml.resolver import BaseResolver
    except ImportError as exc:  # PyYAML without libyaml
        raise Unsure("no libyaml") from exc

    class Composer(CParser, BaseResolver):
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            if kind is ScalarNode:
                return _PLAIN if implicit[0] else _STR
            return BaseResolver.resolve(self, kind, value, implicit)

    return Composer


def build(node: Any) -> Any:
    """The document from libyaml's node graph (`PosMap`, `PosList`, scalars); raises `Unsure` for what ruamel
    must read."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode  # (PyYAML: see compose)

    built: dict[int, Any] = {}  # an anchor's node is built once, and each alias of it is that same object
    open_: set[int] = set()  # collections being built: an alias to one of them is a cycle, which ruamel refuses

    def opened(node: Any, tag: str, container: Any) -> tuple[Any, Lines]:
        """A collection's empty container, known (for its aliases) before its items are built."""
        if node.tag != tag:
            raise Unsure(f"tag {node.tag}")
        built[id(node)] = container
        container.lc = lines = Lines(node.start_mark.line)
        open_.add(id(node))
        return container, lines

    def value_of(node: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Unsure("nested too deep")
        done = built.get(id(node))
        if done is not None:
            if id(node) in open_:
                raise Unsure("an alias inside its own anchor")
            return done
        if isinstance(node, ScalarNode):
            if node.tag == _PLAIN:
                return plain(node.value)
            if node.tag == _STR:
                return node.value
            raise Unsure(f"tag {node.tag}")
        if isinstance(node, SequenceNode):
            items, lines = opened(node, _SEQ, PosList())
            for index, item in enumerate(node.value):
                lines._at[index] = item.start_mark.line
                items.append(value_of(item, depth + 1))
            open_.discard(id(node))
            return items
        if isinstance(node, MappingNode):
            mapping, lines = opened(node, _MAP, PosMap())
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode):
                    raise Unsure("a key that is a list or mapping")
                key = value_of(key_node, depth + 1)
                if key in mapping:
                    raise Unsure("a duplicate key")
                lines._at[key] = key_node.start_mark.line
                mapping[key] = value_of(value_node, depth + 1)
            open_.discard(id(node))
            return mapping
        raise Unsure(f"node {type(node).__name__}")

    return value_of(node, 0)


# YAML 1.2 plain scalars as ruamel.yaml.resolver resolves them (its `implicit_resolvers` for (1, 2)), by the
# first character as it looks them up; compiled at first use
_RULES = {
    "bool": r"^(?:true|True|TRUE|false|False|FALSE)$",
    "float": r"""^(?:
         [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
    "int": r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0o?[0-7_]+
        |[-+]?[0-9_]+
        |[-+]?0x[0-9a-fA-F_]+)$""",
    "merge": r"^(?:<<)$",
    "null": r"""^(?: ~
        |null|Null|NULL
        | )$""",
    "timestamp": r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
        |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
        (?:[Tt]|[ \t]+)[0-9][0-9]?
        :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
        (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
    "value": r"^(?:=)$",
    "yaml": r"^(?:!|&|\*)$",
}
# ruamel's order of trial for each first character (the order its resolvers were added in)
_FIRST: dict[str, tuple[str, ...]] = {}
for _name, _chars in (("bool", "tTfF"), ("float", "-+0123456789."), ("int", "-+0123456789"), ("merge", "<"),
                      ("null", "~nN"), ("timestamp", "0123456789"), ("value", "="), ("yaml", "!&*")):
    for _char in _chars:
        _FIRST[_char] = (*_FIRST.get(_char, ()), _name)
_compiled: dict[str, re.Pattern[str]] = {}
_plain_values: dict[str, Any] = {}  # a file repeats its values (`1h`, `system`): each is resolved once


def plain_tag(value: str) -> str:
    """The tag ruamel gives a plain scalar: `str`, `bool`, `float`, `int`, `merge`, `null`, `timestamp`, ..."""
    if value == "":
        return "null"
    for name in _FIRST.get(value[0], ()):
        pattern = _compiled.get(name)
        if pattern is None:
            pattern = _compiled[name] = re.compile(_RULES[name], re.X)
        if pattern.match(value):
            return name
    return "str"


def plain(value: str) -> Any:
    """A plain scalar's value as ruamel constructs it (ruamel.yaml.constructor, YAML 1.2)."""
    try:
        return _plain_values[value]
    except KeyError:
        pass
    tag = plain_tag(value)
    if tag == "str":
        result: Any = value
    elif tag == "null":
        result = None
    elif tag == "bool":
        result = value.lower() == "true"
    elif tag == "int":
        result = _int(value)
    elif tag == "float":
        result = _float(value)
    else:  # a timestamp, a merge key, `=`, `!`: ruamel's own types
        raise Unsure(f"a plain {tag}")
    if len(_plain_values) < 10_000:
        _plain_values[value] = result
    return result


def _int(value: str) -> int:
    digits = value.replace("_", "")
    sign = -1 if digits[0] == "-" else 1
    digits = digits.lstrip("+-")
    base = {"0b": 2, "0x": 16, "0o": 8}.get(digits[:2])
    try:  # YAML 1.2: a leading zero is decimal (012 is twelve); only 0o is octal
        return sign * (int(digits[2:], base) if base else int(digits))
    except ValueError as exc:  # `0b_` and the like: what ruamel does with them is ruamel's to say
        raise Unsure("an integer") from exc


def _float(value: str) -> float:
    digits = value.replace("_", "").lower()
    sign = -1.0 if digits[0] == "-" else 1.0
    digits = digits.lstrip("+-")
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    try:
        return sign * float(digits)
    except ValueError as exc:
        raise Unsure("a float") from exc
