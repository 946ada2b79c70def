"""nerve.yaml as text: ruamel round-trip parsing (YAML 1.2), line numbers, plain data.

ruamel keeps comments, key order and flow style for edits and knows where every
key sits, which is what turns a pydantic location into `nerve.yaml:5:`. YAML 1.2
also means `off`/`yes` stay strings instead of silently becoming booleans. A read
that edits nothing (validation) goes through `parse_for_reading`: libyaml where it
reads the text as ruamel does (`config.fastread`, thirty times quicker), ruamel else.

The file is read with bounds, because the engine re-reads it on every save and
a config is never big: at most `MAX_BYTES`, nested at most `MAX_DEPTH` levels,
at most `MAX_VALUES` values and `MAX_EXPANDED_BYTES` bytes of scalars once YAML
aliases are expanded (nine levels of nine aliases is a 1.4 KB file that expands
to 387 million values; a 20 KB string aliased ten times at four levels is 10,000
values but 200 MB). Anything past a bound is one problem, found before the work
it would cost is done.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from nerve_cli.config.problems import Loc, Problem

_DUPLICATE = re.compile(r'found duplicate key "(.*?)"')

MAX_BYTES = 256 * 1024  # a thousand senses with their reflexes take about 110 KB
MAX_DEPTH = 32  # nerve.yaml itself needs 5 (top level, section, entry, list, value)
MAX_VALUES = 100_000  # after alias expansion
MAX_EXPANDED_BYTES = 4 * MAX_BYTES  # the scalars' text after alias expansion (without aliases: at most MAX_BYTES)
# Flow brackets outside comments and quoted scalars. ruamel's scanner looks ahead
# over every open flow bracket (quadratic: 3,000 of them take seconds), so their
# depth is counted before ruamel sees the text. A quote opens a quoted scalar only
# where YAML allows one (start of line, after space or `[{,:`).
_FLOW_TOKENS = re.compile(r"""(?:^|(?<=\s))#[^\n]*|(?:^|(?<=[\s\[{,:]))(?:'(?:[^']|'')*'|"(?:[^"\\]|\\.)*")|[\[\]{}]""",
                          re.MULTILINE)


class TooLarge(Exception):
    """A bound was passed; the message says which, for the user."""


def read_text(path: Path) -> tuple[str | None, list[Problem]]:
    """The file's text, or None and one problem: too large, or not UTF-8 (with the line of the first bad byte)."""
    path = Path(path)
    with open(path, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        return None, [_too_large(path.name)]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        message = (f"not UTF-8: byte 0x{data[exc.start]:02x} cannot be decoded ({exc.reason}); "
                   f"save {path.name} as UTF-8")
        return None, [Problem("", message, line=line, column=column, file=path.name)]


def _too_large(file: str) -> Problem:
    return Problem("", f"the file is larger than {MAX_BYTES // 1024} KiB; a config is never this big "
                       "(is it the right file?)", line=1, file=file)


def make_yaml(text: str = "") -> Any:
    """A round-trip ruamel YAML that writes back in the file's own indentation."""
    from ruamel.yaml import YAML  # ~12 ms: only commands that read nerve.yaml pay for it, not `nerve --help`

    yaml = YAML(typ="rt")
    yaml.Reader = printable_reader()
    yaml.max_depth = MAX_DEPTH
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long flow mapping the user wrote on one line
    mapping, sequence, offset = guess_indent(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


# The characters YAML does not allow in a file (its complement: tab, newline, return, the printable ASCII,
# NEL, and every other code point but surrogates and U+FFFE/U+FFFF).
NON_PRINTABLE = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"


@functools.cache
def printable_reader() -> type:
    """ruamel's Reader, finding a non-printable character with a pattern that compiles in 0.4 ms, not 3.

    ruamel names the printable ranges instead (`[^...\\xA0-\\uD7FF...]`), and re compiles that negated class
    into a map of every code point: 3 ms, paid on the first read of any file that is not pure ASCII (the
    scaffold's comments are not). The complement, a few short ranges, matches the same characters.
    """
    from ruamel.yaml.reader import Reader  # (ruamel: see make_yaml)

    return type("PrintableReader", (Reader,), {"NON_PRINTABLE": re.compile(NON_PRINTABLE)})


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
    """The round-trip document, or None and one problem: a syntax error with line and column, or a bound passed."""
    refused = _refused(text, file)
    return (None, [refused]) if refused is not None else _parse_checked(text, file)


def _refused(text: str, file: str) -> Problem | None:
    """The bound a text passes before any parser reads it (its size, its flow brackets' depth), or None."""
    if len(text) > MAX_BYTES:
        return _too_large(file)
    return _flow_too_deep(text, file)


def _parse_checked(text: str, file: str) -> tuple[Any, list[Problem]]:
    """ruamel's reading of a text `_refused` let through."""
    from ruamel.yaml.composer import MaxDepthExceededError  # (ruamel: see make_yaml)
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.reader import ReaderError

    try:
        return _load_bounded(make_yaml(text), text, file)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        message = _too_deep() if isinstance(exc, MaxDepthExceededError) else _syntax_message(exc)
        return None, [Problem("", message, line=line, column=column, file=file)]
    except ReaderError as exc:
        if not isinstance(exc.character, int):
            return None, [Problem("", f"not valid YAML: {exc}", file=file)]
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        message = (f"the character U+{exc.character:04X} is not allowed in a YAML file; remove it, or write it "
                   f"escaped in a double-quoted string (\"\\u{exc.character:04x}\")")
        return None, [Problem("", message, line=line, column=column, file=file)]
    except YAMLError as exc:
        return None, [Problem("", f"not valid YAML: {exc}", file=file)]
    except (IndexError, ValueError, TypeError) as exc:  # ruamel failing on a value it resolved itself (`0b_`)
        return None, [Problem("", f"a value ruamel cannot read ({type(exc).__name__}: {exc}); look for a number "
                                  "written with only underscores after 0b, 0o or 0x, and quote it", file=file)]


def parse_for_reading(text: str, file: str = "nerve.yaml") -> tuple[Any, list[Problem]]:
    """As `parse`, for a read that edits nothing (validation): the document with the lines of its keys and items,
    read by libyaml where it reads the text as ruamel does (`config.fastread`: 10 ms where ruamel takes 320 at
    1,000 senses), else by ruamel. Not for an edit: the document has no comments to keep."""
    from nerve_cli.config import fastread  # (it imports PyYAML: only a validation pays for it)

    refused = _refused(text, file)
    if refused is not None:
        return None, [refused]
    try:
        node = fastread.compose(text)
        if node is None:
            return None, []
        passed = _bound_passed(node, file)
        return (None, [passed]) if passed is not None else (fastread.build(node), [])
    except fastread.Unsure:
        return _parse_checked(text, file)


def _load_bounded(yaml: Any, text: str, file: str) -> tuple[Any, list[Problem]]:
    """ruamel's `load`, with the composed document's expanded size bounded before anything is built from it.

    Composing keeps an alias as a reference to its anchor's node, so a bomb is
    still small here; building expands it, and ruamel's own duplicate-key message
    prints the whole expanded value before `to_plain` could count it.
    """
    constructor, parser = yaml.get_constructor_parser(text)
    try:
        node = constructor.composer.get_single_node()
        if node is None:
            return None, []
        passed = _bound_passed(node, file)
        return (None, [passed]) if passed is not None else (constructor.construct_document(node), [])
    finally:
        parser.dispose()
        for part in ("reader", "scanner"):
            getattr(getattr(yaml, f"_{part}", None), f"reset_{part}", lambda: None)()


def _bound_passed(root: Any, file: str) -> Problem | None:
    """The problem of a composed document whose aliases expand past the bounds (ruamel's nodes or libyaml's)."""
    passed = _past_the_bound(root)
    return None if passed is None else Problem("", _too_many_values(), line=passed.start_mark.line + 1, file=file)


def _past_the_bound(root: Any) -> Any:
    """The first collection node that expands to more than `MAX_VALUES` values or `MAX_EXPANDED_BYTES` bytes
    of scalar text, or None.

    Each node is counted once (by identity), children before parents, so the
    walk is linear in the text however far aliases multiply it, and iterative:
    aliases of aliases nest far deeper than the text (and than Python's stack).
    An alias back into the collection that holds it adds nothing more.
    """
    sizes: dict[int, tuple[int, int]] = {}  # node → (values, bytes of scalar text) once expanded
    open_: set[int] = set()  # collections whose children are still being counted
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if not children_done:
            open_.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes and id(child) not in open_)
            continue
        open_.discard(key)
        values, size = 1, len(node.value) if isinstance(node.value, str) else 0
        for child in children:
            child_values, child_size = sizes.get(id(child), (0, 0))
            values, size = values + child_values, size + child_size
        sizes[key] = values, size
        if values > MAX_VALUES or size > MAX_EXPANDED_BYTES:
            return node
    return None


def _children(node: Any) -> list[Any]:
    value = node.value
    if not isinstance(value, list):
        return []
    return [child for item in value for child in (item if isinstance(item, tuple) else (item,))]


def _too_many_values() -> str:
    return (f"more than {MAX_VALUES:,} values or {MAX_EXPANDED_BYTES // 1024:,} KiB of text once YAML aliases (*name) "
            "are expanded; use fewer aliases, or none")


def _too_deep() -> str:
    return f"nested more than {MAX_DEPTH} levels deep; nerve.yaml needs at most 5 (section, entry, key, list, value)"


def _flow_too_deep(text: str, file: str) -> Problem | None:
    depth = 0
    for match in _FLOW_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                return Problem("", _too_deep(), line=line, file=file)
        elif token in "]}":
            depth = max(0, depth - 1)
    return None


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

    pydantic's strict types would refuse ruamel's `ScalarInt` and friends. Aliases
    are expanded here, so this is where their cost is bounded: `TooLarge` past
    `MAX_VALUES` values or `MAX_DEPTH` levels.
    A key that is itself a list or mapping (`? [a, b]`) becomes its text: it is
    then refused as a name, instead of breaking every dict and set it lands in.
    """
    budget = [MAX_VALUES]
    return _plain(node, budget, 0)


def _plain(node: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge(_too_many_values())
    if depth > MAX_DEPTH:
        raise TooLarge(f"nested more than {MAX_DEPTH} levels deep once YAML aliases (*name) are expanded")
    if isinstance(node, dict):
        return {_key(_plain(k, budget, depth + 1)): _plain(v, budget, depth + 1) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v, budget, depth + 1) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    for kind in (str, int, float):
        if isinstance(node, kind):
            return kind(node)
    return node


def _key(key: Any) -> Any:
    if isinstance(key, (list, dict)):
        return json.dumps(key, default=str)
    return key


def line_of(doc: Any, loc: Loc) -> int | None:
    """1-based line of the deepest part of `loc` present in the document."""
    node: Any = doc
    line = None
    for part in loc:
        if part == "[key]":
            continue
        try:
            positions: Any = getattr(node, "lc", None)  # ruamel's line/column record of a loaded node
            if isinstance(node, dict) and part in node:
                line = positions.key(part)[0] + 1
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line = positions.item(part)[0] + 1
            else:
                break
        except (AttributeError, KeyError, TypeError):  # a node ruamel has no position for
            break
        node = node[part]
    if line is None and hasattr(doc, "lc") and doc.lc.line is not None:
        return doc.lc.line + 1
    return line
