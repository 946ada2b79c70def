"""Edit nerve.yaml the way a careful person would: keep every comment, key order and style.

Every edit goes through `edit_config`: parse (ruamel round-trip), change, dump,
validate the result with the same validator as `nerve config check`, and only
then write it atomically (temp file + fsync + os.replace). An edit that would
leave the file invalid is refused and the file is not touched.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal, cast

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from nerve_cli.atomicfile import write_atomic
from nerve_cli.config.lifecycle_marks import marks, rename_mark
from nerve_cli.config.load import SECTIONS, config_path, read_config, validate
from nerve_cli.config.model import check_name
from nerve_cli.config.problems import count_words, errors_of
from nerve_cli.config.rules import hint
from nerve_cli.config.source import make_yaml, parse
from nerve_cli.config.yamltail import append_item, append_key, insert_key
from nerve_cli.errors import ConfigError, NerveError
from nerve_cli.words import plural

SECTION_ORDER = SECTIONS  # canonical order for a section that has to be created


@contextmanager
def edit_config(home: Path, *, base: str | None = None) -> Iterator[CommentedMap]:
    """Yield the round-trip document; on a clean exit validate it and write it atomically.

    An exception inside the block (or an invalid result) leaves the file untouched.
    `base` edits that text instead of the file's current one (the file is still
    replaced only if nobody changed it meanwhile).
    """
    path = config_path(home)
    original = read_config(path)
    source = original if base is None else base
    doc, problems = parse(source, path.name)
    if problems:
        raise ConfigError(f"{path} cannot be edited: it is not valid YAML; fix it first", problems)
    yaml = make_yaml(source)
    doc = doc if doc is not None else CommentedMap()
    yield doc
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    text = buffer.getvalue()
    if text == original:
        return
    _refuse_if_invalid(path, source, text)
    if read_config(path) != original:
        raise NerveError(f"{path} changed while it was being edited; nothing was written, run the command again")
    write_atomic(path, text)


def _refuse_if_invalid(path: Path, original: str, text: str) -> None:
    errors = errors_of(validate(text, path).problems)
    if not errors:
        return
    if errors_of(validate(original, path).problems):
        raise ConfigError(
            f"{path} is already invalid, so it was not edited; fix it first (`nerve config check`)", errors
        )
    raise ConfigError(f"edit refused: it would make {path} invalid ({count_words(errors)}); the file is unchanged", errors)


def add_sense(home: Path, name: str, settings: dict, reflex: dict | None = None) -> None:
    """Register sense `name` under `senses:` (and optionally a reflex for it)."""
    _check_new_name(name, "sense")
    with edit_config(home) as doc:
        _add_entry(doc, "senses", "sense", name, settings)
        if reflex is not None:
            reflexes = _list_section(doc, "reflexes")
            entry = {"sense": name, **{k: v for k, v in reflex.items() if k != "sense"}}
            append_item(reflexes, _node(entry, flow=_sibling_flow(reflexes)))


def add_workflow(home: Path, name: str, settings: dict) -> None:
    """Register workflow `name` under `workflows:`."""
    _check_new_name(name, "workflow")
    with edit_config(home) as doc:
        _add_entry(doc, "workflows", "workflow", name, settings)


def _add_entry(doc: CommentedMap, section: str, kind: str, name: str, settings: dict) -> None:
    """A new `name: settings` entry in a mapping section, in the style of its siblings; refuses an existing name."""
    entries = _mapping_section(doc, section)
    if name in entries:
        raise NerveError(f"{kind} `{name}` is already in nerve.yaml ({section}.{name})")
    append_key(entries, name, _node(settings, flow=_sibling_flow(entries)))


def set_enabled(
    home: Path, kind: Literal["sense", "workflow", "reflex"], name_or_index: str | int, enabled: bool
) -> None:
    """Set `enabled:` on one sense, workflow or reflex (by index); adds the key only when disabling."""
    with edit_config(home) as doc:
        parent, key = _locate(doc, kind, name_or_index)
        entry = parent[key]
        if entry is None:
            entry = parent[key] = _node({}, flow=False)
        if not isinstance(entry, CommentedMap):
            raise NerveError(f"{kind} `{name_or_index}` in nerve.yaml is not a mapping; fix it by hand first")
        if "enabled" in entry:
            entry["enabled"] = enabled
        elif not enabled:
            append_key(entry, "enabled", False)


def _locate(doc: CommentedMap, kind: str, name_or_index: str | int) -> tuple[Any, Any]:
    if kind == "reflex":
        reflexes = doc.get("reflexes")
        count = len(reflexes) if isinstance(reflexes, list) else 0
        try:
            index = int(name_or_index)
        except (TypeError, ValueError):
            raise NerveError(f"a reflex is chosen by its index (0 to {count - 1}), got {name_or_index!r}") from None
        if not 0 <= index < count:
            raise NerveError(f"there is no reflexes[{index}] in nerve.yaml ({plural(count, 'reflex', 'reflexes')})")
        return reflexes, index
    section = {"sense": "senses", "workflow": "workflows"}.get(kind)
    if section is None:
        raise ValueError(f"kind must be 'sense', 'workflow' or 'reflex', got {kind!r}")
    entries = doc.get(section)
    if not isinstance(entries, dict) or name_or_index not in entries:
        known = list(entries) if isinstance(entries, dict) else []
        raise NerveError(f"there is no {kind} `{name_or_index}` in nerve.yaml{hint(str(name_or_index), known)}")
    return entries, name_or_index


def _check_new_name(name: str, kind: str) -> None:
    try:
        check_name(name)
    except ValueError as exc:
        raise NerveError(f"invalid {kind} name: {exc}") from None


def _mapping_section(doc: CommentedMap, section: str) -> CommentedMap:
    return _section(doc, section, CommentedMap)


def _list_section(doc: CommentedMap, section: str) -> CommentedSeq:
    return _section(doc, section, CommentedSeq)


def _section(doc: CommentedMap, section: str, kind: type) -> Any:
    """doc[section], created (in canonical order) when absent or empty (`senses:` with only comments)."""
    value: Any = doc.get(section)
    if value is None:
        value = kind()
        value.fa.set_block_style()
        if section in doc:
            doc[section] = value
        else:
            later = [i for i, k in enumerate(doc) if k in SECTION_ORDER[SECTION_ORDER.index(section) + 1 :]]
            insert_key(doc, later[0] if later else len(doc), section, value)
    elif not isinstance(value, kind):
        raise NerveError(f"`{section}:` in nerve.yaml is not a {'list' if kind is CommentedSeq else 'mapping'}; fix it first")
    elif not value:
        cast(Any, value).fa.set_block_style()  # `senses: {}` grows into a block, not a one-line flow mapping
    return value


def _sibling_flow(container: Any) -> bool:
    """New entries copy the style of the last existing one (flow `{a: 1}` or block); block when empty."""
    if not container:
        return False
    last = container[next(reversed(container))] if isinstance(container, dict) else container[-1]
    return isinstance(last, (CommentedMap, CommentedSeq)) and last.fa.flow_style() is True


def _node(value: Any, *, flow: bool) -> Any:
    """Plain dicts/lists → ruamel nodes; lists of scalars and nested mappings are written inline."""
    if isinstance(value, dict):
        node = CommentedMap((k, _node(v, flow=True)) for k, v in value.items())
        if flow:
            node.fa.set_flow_style()
        else:
            node.fa.set_block_style()
        return node
    if isinstance(value, (list, tuple)):
        seq = CommentedSeq(_node(v, flow=True) for v in value)
        seq.fa.set_flow_style()
        return seq
    return value


def rename_sense_refs(doc: CommentedMap, old: str, new: str) -> list[str]:
    """Rename sense `old` to `new` everywhere nerve.yaml names it; returns what changed, one line each.

    The `senses:` key keeps its place and comments; `peers:` lists, reflexes'
    `sense:` and `on:`, and `# nerve: disabled with OLD` markers follow.
    """
    changed = []
    senses = doc["senses"]
    position = list(senses).index(old)
    comment = senses.ca.items.pop(old, None)
    value = senses[old]
    del senses[old]
    senses.insert(position, new, value)
    if comment is not None:
        senses.ca.items[new] = comment
    changed.append(f"senses.{old} → senses.{new}")
    for name, settings in senses.items():
        peers = settings.get("peers") if isinstance(settings, dict) else None
        if isinstance(peers, list) and old in peers:
            peers[peers.index(old)] = new
            changed.append(f"senses.{name}.peers")
    for i, reflex in enumerate(doc.get("reflexes") or []):
        if not isinstance(reflex, dict):
            continue
        if reflex.get("sense") == old:
            reflex["sense"] = new
            changed.append(f"reflexes[{i}].sense")
        on = reflex.get("on")
        if isinstance(on, list) and old in on:
            on[on.index(old)] = new
            changed.append(f"reflexes[{i}].on")
    for (kind, key), root in marks(doc).items():
        if root == old:
            parent = doc[{"sense": "senses", "reflex": "reflexes", "workflow": "workflows"}[kind]]
            rename_mark(parent, key, new)
            changed.append(f"marker on {kind} {key}: disabled with {new}")
    return changed
