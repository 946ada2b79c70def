"""Turn nerve.yaml entries on and off in the ruamel document, leaving a marker on what a cascade turned off.

The marker is an end-of-line comment on the line that says `enabled: false`:

    d:
      peers: [a]
      enabled: false  # nerve: disabled with a
    - {sense: b, on: [a], enabled: false}  # nerve: disabled with a

A comment is invisible to validation and survives every round trip (ruamel keeps
it, the user can read it, git shows it), and it names the sense whose
`nerve sense disable` turned the entry off, which is what
`nerve sense enable a --cascade` looks for. A user's own comment on that line is
kept: the marker is appended to it and removed from it again.

Where ruamel keeps that comment: for a block entry, after its `enabled` key; for a
flow entry (`{...}` on one line), after the entry itself, in its parent.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from nerve_cli.config.yamltail import append_key

MARK = "# nerve: disabled with "
_MARK_RE = re.compile(r"\s*# nerve: disabled with ([a-z0-9][a-z0-9._-]*)")
_FLOW_TAIL = ", enabled: false"
SECTIONS = {"sense": "senses", "reflex": "reflexes", "workflow": "workflows"}


def locate(doc: Any, kind: str, key: str | int) -> tuple[Any, Any]:
    """(parent container, key) of a sense/workflow by name or a reflex by index (they exist: planned)."""
    parent = doc[SECTIONS[kind]]
    if isinstance(parent, CommentedSeq) and not 0 <= int(key) < len(parent):
        raise IndexError(key)
    if isinstance(parent, CommentedMap) and key not in parent:
        raise KeyError(key)
    return parent, key


def read_mark(parent: Any, key: Any) -> str | None:
    """The sense named by this entry's `# nerve: disabled with NAME` marker, if it has one."""
    slot = _slot(parent, key, create=False)
    token = slot[0][slot[1]] if slot else None
    if token is None or not token.value.startswith("#"):
        return None
    found = _MARK_RE.search(token.value.partition("\n")[0])
    return found.group(1) if found else None


def marks(doc: Any) -> dict[tuple[str, str | int], str]:
    """(kind, name or index) → marker root, for every disabled sense, reflex and workflow that has one."""
    out: dict[tuple[str, str | int], str] = {}
    for kind, section in SECTIONS.items():
        parent = doc.get(section) if isinstance(doc, dict) else None
        if not isinstance(parent, (CommentedSeq, CommentedMap)):
            continue
        keys = range(len(parent)) if isinstance(parent, CommentedSeq) else parent
        for key in keys:
            entry = parent[key]
            if isinstance(entry, dict) and entry.get("enabled") is False:
                root = read_mark(parent, key)
                if root:
                    out[(kind, key)] = root
    return out


def disable(parent: Any, key: Any, mark: str | None) -> None:
    """`enabled: false` on parent[key]; with `mark`, note `# nerve: disabled with MARK` (replacing an older one)."""
    entry = parent[key]
    if entry is None:
        entry = parent[key] = CommentedMap()
        entry.fa.set_block_style()
    if "enabled" in entry:
        _shift(parent, key, 0 if entry["enabled"] is False else 1)
        entry["enabled"] = False
    else:
        _shift(parent, key, len(_FLOW_TAIL))
        append_key(entry, "enabled", False)
    _strip_mark(parent, key)
    if mark:
        _add_mark(parent, key, mark)


def enable(parent: Any, key: Any) -> None:
    """Turn parent[key] back on and drop its marker.

    A trailing `enabled:` with nothing else on its line is removed (on is the
    default), so disable → enable gives back the file as it was; otherwise it
    becomes `enabled: true`.
    """
    entry = parent[key]
    if not isinstance(entry, CommentedMap) or "enabled" not in entry:
        return
    _strip_mark(parent, key)
    flow = entry.fa.flow_style() is True
    last = next(reversed(entry)) == "enabled"
    if last and (flow or not _eol(entry, "enabled")):
        _shift(parent, key, -len(_FLOW_TAIL))
        _drop_last_enabled(parent, key)
    else:
        _shift(parent, key, -1 if entry["enabled"] is False else 0)
        entry["enabled"] = True


def _shift(parent: Any, key: Any, delta: int) -> None:
    """Keep the gap before a comment that follows a one-line flow entry whose text grew or shrank by `delta`."""
    entry = parent[key]
    if not isinstance(entry, CommentedMap) or entry.fa.flow_style() is not True or not delta:
        return
    slot = _slot(parent, key, create=False)
    token = slot[0][slot[1]] if slot else None
    if token is not None and token.value.startswith("#") and token.start_mark is not None:
        token.start_mark = CommentMark(max(0, token.start_mark.column + delta))


def _slot(parent: Any, key: Any, create: bool) -> tuple[list, int] | None:
    """The ruamel comment slot that holds the end-of-line comment of this entry's `enabled` line."""
    entry = parent[key]
    holder, hkey = parent, key
    if isinstance(entry, CommentedMap) and entry.fa.flow_style() is not True and "enabled" in entry:
        holder, hkey = entry, "enabled"
    size, index = (4, 2) if isinstance(holder, CommentedMap) else (2, 0)
    items = holder.ca.items
    if hkey not in items:
        if not create:
            return None
        items[hkey] = [None] * size
    return items[hkey], index


def _eol(holder: Any, key: Any) -> str:
    slot = holder.ca.items.get(key)
    token = slot[2 if isinstance(holder, CommentedMap) else 0] if slot else None
    return token.value.partition("\n")[0].strip() if token is not None and token.value.startswith("#") else ""


def _add_mark(parent: Any, key: Any, mark: str) -> None:
    comments, index = _slot(parent, key, create=True)  # type: ignore[misc]
    token = comments[index]
    text = MARK + mark
    if token is None:
        comments[index] = CommentToken(" " + text + "\n", CommentMark(0))
    elif token.value.startswith("#"):  # the user's own comment on that line: keep it, append ours
        eol, _, rest = token.value.partition("\n")
        token.value = f"{eol.rstrip()}  {text}\n{rest}"
    else:  # no comment on the line, comment lines below it
        token.value = " " + text + token.value


def _strip_mark(parent: Any, key: Any) -> None:
    slot = _slot(parent, key, create=False)
    token = slot[0][slot[1]] if slot else None
    if token is None or not token.value.startswith("#"):
        return
    eol, _, rest = token.value.partition("\n")
    kept = _MARK_RE.sub("", eol).rstrip()
    if kept.strip():
        token.value = kept + "\n" + rest
    elif rest:
        token.value = "\n" + rest  # ruamel's form for "no comment on this line, lines follow"
    else:
        slot[0][slot[1]] = None  # type: ignore[index]


def _drop_last_enabled(parent: Any, key: Any) -> None:
    """Delete the entry's last key `enabled`, keeping the comment lines that followed it."""
    entry = parent[key]
    slot = entry.ca.items.pop("enabled", None)
    del entry["enabled"]
    after = slot[2] if slot else None
    rest = after.value.partition("\n")[2] if after is not None and after.value.startswith("#") else (
        after.value[1:] if after is not None else "")
    if not entry:
        parent[key] = None  # `c:` came back as it was written
        holder, hkey = parent, key
    else:
        holder, hkey = entry, next(reversed(entry))
        while isinstance(holder[hkey], (CommentedMap, CommentedSeq)) and holder[hkey] and \
                holder[hkey].fa.flow_style() is not True:
            holder, hkey = holder[hkey], (next(reversed(holder[hkey])) if isinstance(holder[hkey], CommentedMap)
                                          else len(holder[hkey]) - 1)
    if rest:
        _append_lines(holder, hkey, rest)


def _append_lines(holder: Any, key: Any, rest: str) -> None:
    size, index = (4, 2) if isinstance(holder, CommentedMap) else (2, 0)
    comments = holder.ca.items.setdefault(key, [None] * size)
    token = comments[index]
    if token is None:
        comments[index] = CommentToken("\n" + rest, CommentMark(0))
    else:
        token.value = token.value + rest


def rename_mark(parent: Any, key: Any, new: str) -> None:
    """Point this entry's marker at sense `new` (after a rename), keeping the line's spacing."""
    slot = _slot(parent, key, create=False)
    token = slot[0][slot[1]] if slot else None
    if token is not None and token.value.startswith("#"):
        token.value = _MARK_RE.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + new, token.value, count=1)
