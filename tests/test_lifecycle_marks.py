"""The `# nerve: disabled with NAME` marker: written on the `enabled: false` line, found again, removed cleanly."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nerve_cli.config.lifecycle_marks import disable, enable, locate, marks
from nerve_cli.config.load import validate
from nerve_cli.config.source import make_yaml

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance" / "nerve.yaml"

SHAPES = """\
senses:
  flow: {group: g}  # a user's comment
  block:
    group: g
    enabled: true   # explicit, not last
    peers: [flow]
  bare:
  listy:
    peers:
      - flow   # one peer
      - block
  # a commented-out sense: {group: old}

reflexes:
  - {sense: flow, interval: 10s}   # flow reflex
  - sense: block
    on: [flow]
  - {sense: listy, on: [block]}
  # trailing comment of the reflexes
workflows:
  wf: {concurrency: 1}
"""

ITEMS = [("sense", "flow"), ("sense", "block"), ("sense", "bare"), ("sense", "listy"),
         ("reflex", 0), ("reflex", 1), ("reflex", 2), ("workflow", "wf")]


def dump(yaml, doc) -> str:
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    return buffer.getvalue()


def turn(text: str, items: list, on: bool, mark: str | None = "root") -> str:
    yaml = make_yaml(text)
    doc = yaml.load(text)
    for kind, key in items:
        parent, key = locate(doc, kind, key)
        enable(parent, key) if on else disable(parent, key, mark)
    return dump(yaml, doc)


MARKED = """\
senses:
  flow: {group: g, enabled: false}  # a user's comment  # nerve: disabled with root
  block:
    group: g
    enabled: false  # explicit, not last  # nerve: disabled with root
    peers: [flow]
  bare:
    enabled: false  # nerve: disabled with root
  listy:
    peers:
      - flow   # one peer
      - block
    enabled: false  # nerve: disabled with root
  # a commented-out sense: {group: old}

reflexes:
  - {sense: flow, interval: 10s, enabled: false}   # flow reflex  # nerve: disabled with root
  - sense: block
    on: [flow]
    enabled: false  # nerve: disabled with root
  - {sense: listy, on: [block], enabled: false}  # nerve: disabled with root
  # trailing comment of the reflexes
workflows:
  wf: {concurrency: 1, enabled: false}  # nerve: disabled with root
"""


def test_the_marker_goes_on_the_enabled_line_of_every_shape_and_is_found_again() -> None:
    off = turn(SHAPES, ITEMS, on=False)
    assert off == MARKED
    assert validate(off).valid
    assert marks(make_yaml(off).load(off)) == {item: "root" for item in ITEMS}


def test_enable_gives_back_the_file_as_it_was() -> None:
    assert turn(MARKED, ITEMS, on=True) == SHAPES


def test_template_round_trip_only_drops_an_explicit_trailing_enabled_true() -> None:
    text = TEMPLATE.read_text()
    items = [("sense", "cpu-percent"), ("sense", "disk-usage"), ("reflex", 0), ("reflex", 2)]
    back = turn(turn(text, items, on=False), items, on=True)
    assert back == text.replace("    grace_period: 30s\n    enabled: true\n", "    grace_period: 30s\n")


def test_a_new_mark_replaces_an_old_one_and_unmarked_entries_are_not_reported() -> None:
    off = turn(SHAPES, [("sense", "flow")], on=False, mark="first")
    again = turn(off, [("sense", "flow")], on=False, mark="second")
    assert "disabled with first" not in again and again.count("# nerve: disabled with second") == 1
    plain = turn(SHAPES, [("sense", "bare")], on=False, mark=None)
    assert marks(make_yaml(plain).load(plain)) == {}


@pytest.mark.parametrize("kind,key", [("sense", "nope"), ("reflex", 9)])
def test_locate_refuses_what_is_not_there(kind: str, key) -> None:
    doc = make_yaml(SHAPES).load(SHAPES)
    with pytest.raises((KeyError, IndexError)):
        locate(doc, kind, key)
