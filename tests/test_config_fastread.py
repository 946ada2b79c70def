"""nerve.yaml read for validation by libyaml (config.fastread) gives what ruamel gives: the same values, the same
line for every key and item, the same problems; and ruamel reads whatever libyaml would not read the same way."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from nerve_cli.config import fastread
from nerve_cli.config.source import line_of, parse, parse_for_reading, to_plain

ROOT = Path(__file__).resolve().parents[1]

SCALARS = [
    "", "~", "null", "Null", "NULL", "nULL", "true", "True", "TRUE", "tRUE", "false", "False", "FALSE", "yes", "no",
    "on", "off", "On", "OFF", "y", "n", "0", "1", "-1", "+1", "012", "0o17", "-0o17", "0x1F", "0x1f", "-0x1F", "0b101",
    "1_000", "1_000_", "0b_", "08", "1:30", "1.5", "-1.5", "+1.5", ".5", "-.5", "1.", "1e3", "1E3", "1e-3", "1.5e+3",
    ".inf", "-.inf", "+.INF", ".Inf", ".nan", ".NaN", ".NAN", "nan", "inf", "1_0.5", "2026-01-01",
    "2026-01-01T10:00:00Z", "2026-1-1 1:00:00", "<<", "=", "!", "&", "*", "1h", "30s", "500ms", "1h30m", "2d", "1w",
    "system", "g0", "a.b", "pr.*", "ci.>", "127.0.0.1:9464", "8787", "80%", "300MB", "512MiB", "-", "--", ".", "...x",
    "0.0.0.0", "1.2.3", "v1", "e3", "_1", "+", "+-1", "0x", "0o", "1__2", "12:30:00",
]


REFUSED = object()


def ruamel_value(text: str) -> Any:
    doc, problems = parse(f"k: {text}\n")
    return REFUSED if problems else to_plain(doc)["k"]


@pytest.mark.parametrize("value", SCALARS)
def test_a_plain_scalar_resolves_and_reads_as_ruamels(value: str) -> None:
    tag = VersionedResolver(version=(1, 2)).resolve(ScalarNode, value, (True, False))
    assert fastread.plain_tag(value) == str(tag).rsplit(":", 1)[-1], value
    expected = ruamel_value(value)
    try:
        got = fastread.plain(value)
    except fastread.Unsure:  # read by ruamel instead: nothing to compare
        return
    if expected is REFUSED:  # not a value on its own (`-`): the document is read alike all the same
        same_reading(f"k: {value}\n")
        return
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float) and math.isnan(got)
    else:
        assert (got, type(got)) == (expected, type(expected)), value


DOCUMENTS = {
    "scaffold": (ROOT / "templates" / "instance" / "nerve.yaml").read_text(),
    "flow and block": """\
engine:
  max_rounds: 100
  health_interval: 1m   # comment
senses:
  cpu: {group: system, throttle: 5s, peers: [mem, disk]}
  mem:
    group: system
    peers:
      - cpu
      - "disk"
  empty:
  'quoted key': {timeout: 30s}
reflexes:
  - {sense: cpu, interval: 10s}
  - sense: mem
    on: [cpu, 'task.*', "ci.>"]
    enabled: off
  -   {sense: empty, cron: "*/5 * * * *"}
""",
    "scalars of every style": """\
literal: |
  line one
    indented
  # not a comment
folded: >-
  folded
  text

  para
kept: |+
  kept

plain multi: a plain
  scalar over lines
single: 'it''s'
double: "tab\\tnew\\nline \\u00e9 \\x41"
unicode: é→—
int keys: {1: a, 2: b}
bool key: {true: x}
nulls: [~, null, ]
numbers: [1, -2, 0x10, 0o7, 1_000, 1.5, .5, 1e3, .inf]
""",
    "anchors": """\
base: &base {group: system, timeout: 5s}
senses:
  a: *base
  b: *base
list: &l [1, 2]
again: *l
""",
    "documents": "--- \nsenses: {}\n...\n",
    "only comments": "# nothing\n\n# here\n",
    "top is a list": "- a\n- b\n",
    "crlf": "engine:\r\n  max_rounds: 5\r\nsenses:\r\n  a: {}\r\n",
    "deep but allowed": "a:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(20)) + " " * 42 + "v: 1\n",
}

# what libyaml does not read as ruamel does (or says differently): ruamel reads these
FALLBACKS = {
    "duplicate key": "engine:\n  max_rounds: 1\n  max_rounds: 2\n",
    "merge key": "base: &b {group: x}\nsenses:\n  a:\n    <<: *b\n    timeout: 5s\n",
    "timestamp": "engine:\n  since: 2026-01-01\n",
    "explicit tag": "engine:\n  max_rounds: !!str 5\n  other: !custom x\n",
    "yaml 1.1": "%YAML 1.1\n---\nsenses:\n  a: {enabled: off}\n",
    "syntax error": "senses:\n  a: {group: [x\nreflexes: []\n",
    "bad indentation": "senses:\n  a:\n    group: x\n   timeout: 5s\n",
    "tab": "senses:\n\ta: {}\n",
    "complex key": "? [a, b]\n: 1\n",
    "too deep": "a:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(40)) + " " * 82 + "v: 1\n",
    "control character": "senses:\n  a: {group: sys\x07tem}\n",
    "recursive alias": "a: &a [*a]\n",
    "empty flow entry": "a: [1, , 2]\n",  # ruamel takes it, libyaml does not
    # a line break to libyaml (YAML 1.1), not to ruamel: both found by the mutants below
    "line separator in a comment": "workflows:\n  #   concurren\u2028cy: 1\n",
    "line separator before a key": "#   max_qu\u2028eue:     queue length\nworkflows:\n",
    "next line": "senses: {}\n# a\x85b: 1\n",
    "alias bomb": "a0: &a0 [" + ", ".join(["lol"] * 10) + "]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 8)) + "senses: *a7\n",
}


def paths(data: Any, at: tuple = ()) -> Iterator[tuple]:
    yield at
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*at, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from paths(value, (*at, index))


def same_reading(text: str) -> tuple[Any, Any]:
    """(ruamel's, the fast read's) documents, after checking they hold the same values, lines and problems."""
    slow, slow_problems = parse(text)
    fast, fast_problems = parse_for_reading(text)
    assert fast_problems == slow_problems
    try:
        data = to_plain(slow)
    except Exception as exc:  # (too large once expanded: the same for both)
        with pytest.raises(type(exc)):
            to_plain(fast)
        return slow, fast
    assert repr(to_plain(fast)) == repr(data)  # (repr: ruamel's tagged values compare by identity)
    for at in paths(data):
        assert line_of(fast, at) == line_of(slow, at), at
    return slow, fast


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_libyaml_reads_the_document_as_ruamel_does(name: str) -> None:
    _, fast = same_reading(DOCUMENTS[name])
    if name != "only comments":
        assert isinstance(fast, (fastread.PosMap, fastread.PosList)), "read by ruamel: the fast path did not apply"


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_what_libyaml_would_read_otherwise_is_read_by_ruamel(name: str) -> None:
    same_reading(FALLBACKS[name])


def test_mutants_of_the_scaffold_are_read_alike() -> None:
    """Seeded mutants of the scaffold's nerve.yaml (tests/configfuzz.py: bytes, structure, depth, aliases, lines,
    size): read alike by both, whichever reads them. 7,000 of them found the line separators above."""
    import configfuzz

    fast = 0
    for _kind, data in configfuzz.mutants(seed=37, count=600):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        _, doc = same_reading(text)
        fast += isinstance(doc, (fastread.PosMap, fastread.PosList))
    assert fast > 100  # most of the rest are syntax errors, read by ruamel for its message


def test_a_yaml_1_1_word_stays_a_string_and_its_line_is_told(tmp_path: Path) -> None:
    """PyYAML's own resolver would make `off` False and `5s`... a string; YAML 1.2 (ruamel, and the fast read)
    keeps `off` a string, which `enabled` refuses, at its own line."""
    from nerve_cli.instance.scaffold import create_instance

    home = tmp_path / "inst"
    create_instance(home)
    config = home / "nerve.yaml"
    config.write_text(config.read_text().replace("\nworkflows:\n", "\nworkflows:\n  w: {enabled: off}\n", 1))
    done = subprocess.run([sys.executable, "-m", "nerve_cli", "config", "check", "--fast", "--home", str(home)],
                          capture_output=True, text=True, timeout=60)
    line = config.read_text().splitlines().index("  w: {enabled: off}") + 1
    assert done.returncode == 1 and f"nerve.yaml:{line}:" in done.stdout and "workflows.w.enabled" in done.stdout, \
        done.stdout
