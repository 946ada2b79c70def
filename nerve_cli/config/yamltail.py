"""Append to a ruamel mapping or sequence without landing after its trailing comment.

ruamel attaches the comments and blank lines that follow a collection to the
*deepest last* node inside it. Appending a key or item naively puts the new
entry after those comments, i.e. after the commented-out examples and just
before the next section:

    senses:
      cpu-usage: {group: system}
      # disk-usage: {...}        <- comment attached to cpu-usage
                                 <- blank line (also attached)
      new-sense: {...}           <- naive append lands here
    reflexes:

So we move that comment block (keeping an end-of-line comment where it was)
to the new last node.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

Slot = tuple[list, int]  # a ruamel comment list and the index of the "after" comment in it


def _last_key(node: Any) -> Any:
    return next(reversed(node)) if isinstance(node, CommentedMap) else len(node) - 1


def _is_block(value: Any) -> bool:
    return isinstance(value, (CommentedMap, CommentedSeq)) and len(value) > 0 and value.fa.flow_style() is not True


def _slot(node: Any, key: Any, create: bool) -> Slot | None:
    """The comment slot printed after `node[key]` (index 2 for mappings, 0 for sequences)."""
    size, index = (4, 2) if isinstance(node, CommentedMap) else (2, 0)
    entry = node.ca.items.get(key)
    if entry is None:
        if not create:
            return None
        entry = node.ca.items[key] = [None] * size
    return entry, index


def trailing_slot(node: Any) -> Slot | None:
    """Where the comment after the last line of `node` is stored, if there is one."""
    while isinstance(node, (CommentedMap, CommentedSeq)) and len(node):
        key = _last_key(node)
        slot = _slot(node, key, create=False)
        if slot and slot[0][slot[1]] is not None:
            return slot
        if not _is_block(node[key]):
            return None
        node = node[key]
    return None


def _tail_holder(node: Any, key: Any) -> Slot:
    """The slot for a comment after `node[key]`, descending into block collections."""
    while _is_block(node[key]):
        node, key = node[key], _last_key(node[key])
    slot = _slot(node, key, create=True)
    assert slot is not None
    return slot


def _move(old: Slot | None, new: Slot) -> None:
    if old is None:
        return
    (old_list, old_i), (new_list, new_i) = old, new
    token = old_list[old_i]
    text = token.value
    if text.startswith("#"):  # "# eol comment\n  # following lines..."
        eol, _, rest = text.partition("\n")
        if not rest.strip():
            return  # only an end-of-line comment: it belongs to the line it is on
        old_list[old_i] = CommentToken(eol + "\n", start_mark=token.start_mark)
        token.value = "\n" + rest
    else:
        old_list[old_i] = None
    new_list[new_i] = token


def append_key(mapping: CommentedMap, key: Any, value: Any) -> None:
    """`mapping[key] = value` as the new last key, above any trailing comment block."""
    old = trailing_slot(mapping)
    mapping[key] = value
    _move(old, _tail_holder(mapping, key))


def append_item(seq: CommentedSeq, value: Any) -> None:
    """`seq.append(value)`, above any trailing comment block."""
    old = trailing_slot(seq)
    seq.append(value)
    _move(old, _tail_holder(seq, len(seq) - 1))


def insert_key(mapping: CommentedMap, position: int, key: Any, value: Any) -> None:
    """Insert `key` before the entry now at `position`, keeping the comment block above that entry there."""
    if position >= len(mapping):
        append_key(mapping, key, value)
        return
    keys = list(mapping)
    old = None
    if position > 0:
        before = keys[position - 1]
        old = _slot(mapping, before, create=False) if not _is_block(mapping[before]) else None
        old = old if old and old[0][old[1]] is not None else trailing_slot(mapping[before])
    mapping.insert(position, key, value)
    _move(old, _tail_holder(mapping, key))


def remove_entry(node: Any, key: Any) -> None:
    """`del node[key]` (a mapping key or a sequence index) without losing the comment lines after it.

    ruamel stores the comments that follow an entry (the next section's
    explanation, say) on that entry; they move to the entry before it. The
    removed entry's own end-of-line comment goes with it.
    """
    keys = list(node) if isinstance(node, CommentedMap) else list(range(len(node)))
    position = keys.index(key)
    tail = _entry_tail(node, key)
    text = tail[0][tail[1]].value if tail else ""
    rest = text.partition("\n")[2] if text.startswith("#") else text[1:] if text.startswith("\n") else ""
    del node[key]
    if isinstance(node, CommentedMap):
        node.ca.items.pop(key, None)
    if not rest.strip() or position == 0:
        return
    before = keys[position - 1]
    comments, index = _tail_holder(node, before)
    token = comments[index]
    if token is None:
        comments[index] = CommentToken("\n" + rest, CommentMark(0))
    else:
        token.value = token.value + rest


def _entry_tail(node: Any, key: Any) -> Slot | None:
    """The slot holding the comment after the last line of `node[key]`, if any."""
    while True:
        slot = _slot(node, key, create=False)
        if slot and slot[0][slot[1]] is not None:
            return slot
        if not _is_block(node[key]):
            return None
        node, key = node[key], _last_key(node[key])
