"""Comment-keeping edits of nerve.yaml: comments, order and style survive; invalid edits are refused."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from nerve_cli.config import edit
from nerve_cli.config.load import load_config, validate
from nerve_cli.errors import ConfigError, NerveError

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance" / "nerve.yaml"

COMMENTED = """\
# My instance. Keep this comment.
engine:
  max_rounds: 50   # lower than the default on purpose

senses:
  cpu-percent: {group: system, throttle: 5s}   # fast one
  disk-usage: {group: system}
  # old-sense: {group: legacy}   (kept for reference)

# Reflexes below.
reflexes:
  - sense: cpu-percent
    interval: 10s   # every ten seconds
  - sense: disk-usage
    on: [cpu-percent]
  # end of reflexes

# workflows:
#   cleanup: {concurrency: 1}
"""


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "nerve.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def comments(text: str) -> list[str]:
    return [line[line.index("#"):] for line in text.splitlines() if "#" in line]


def test_no_change_keeps_the_bytes(home: Path) -> None:
    path = write(home, TEMPLATE.read_text())
    before = path.read_bytes(), path.stat().st_mtime_ns
    with edit.edit_config(home) as doc:
        assert "senses" in doc
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_add_sense_keeps_comments_and_lands_before_trailing_comments(home: Path) -> None:
    path = write(home, COMMENTED)
    edit.add_sense(home, "memory-usage", {"group": "system", "throttle": "5s"}, reflex={"interval": "15s"})
    text = path.read_text()
    assert comments(text) == comments(COMMENTED)
    lines = text.splitlines()
    # the new sense follows the last sense directly, in the same flow style as its siblings
    assert lines[lines.index("  disk-usage: {group: system}") + 1] == "  memory-usage: {group: system, throttle: 5s}"
    # the new reflex comes before the section's trailing comment, in block style like the others
    tail = text[text.index("    on: [cpu-percent]"):]
    assert tail.startswith("    on: [cpu-percent]\n  - sense: memory-usage\n    interval: 15s\n  # end of reflexes\n")
    assert text.endswith("# workflows:\n#   cleanup: {concurrency: 1}\n")
    config = load_config(home)
    assert config.senses["memory-usage"].throttle == 5
    assert config.reflexes[-1].sense == "memory-usage"


def test_add_sense_to_template_keeps_every_comment(home: Path) -> None:
    path = write(home, TEMPLATE.read_text())
    edit.add_sense(home, "open-prs", {"group": "github", "peers": ["cpu-percent"]}, reflex={"on": ["pr.opened"]})
    text = path.read_text()
    assert comments(text) == comments(TEMPLATE.read_text())
    assert "  open-prs:\n    group: github\n    peers: [cpu-percent]\n\n# Reflexes" in text
    assert "  - sense: open-prs\n    on: [pr.opened]\n\n# Workflows" in text


def test_add_workflow_under_an_empty_section_with_commented_examples(home: Path) -> None:
    path = write(home, TEMPLATE.read_text())
    edit.add_workflow(home, "code-review", {"concurrency": 3, "overflow": "queue"})
    text = path.read_text()
    assert comments(text) == comments(TEMPLATE.read_text())
    assert "workflows:\n  code-review:\n    concurrency: 3\n    overflow: queue\n  # cleanup:" in text
    assert load_config(home).workflows["code-review"].concurrency == 3


def test_set_enabled_keeps_comments_and_end_of_line_comments(home: Path) -> None:
    path = write(home, COMMENTED)
    edit.set_enabled(home, "sense", "cpu-percent", False)
    edit.set_enabled(home, "reflex", 0, False)
    text = path.read_text()
    assert comments(text) == comments(COMMENTED)
    assert re.search(r"^  cpu-percent: \{group: system, throttle: 5s, enabled: false\} +# fast one$", text, re.M)
    assert "    interval: 10s   # every ten seconds\n    enabled: false\n  - sense: disk-usage" in text
    edit.set_enabled(home, "sense", "cpu-percent", True)
    assert re.search(r"\{group: system, throttle: 5s, enabled: true\} +# fast one$", path.read_text(), re.M)
    config = load_config(home)
    assert config.senses["cpu-percent"].enabled and not config.reflexes[0].enabled


def test_set_enabled_true_on_a_sense_without_the_key_changes_nothing(home: Path) -> None:
    path = write(home, COMMENTED)
    edit.set_enabled(home, "sense", "disk-usage", True)
    assert path.read_text() == COMMENTED


def test_set_enabled_on_a_sense_with_no_settings(home: Path) -> None:
    path = write(home, "senses:\n  a:\n  b: {}\n")
    edit.set_enabled(home, "sense", "a", False)
    assert not load_config(home).senses["a"].enabled
    assert path.read_text().startswith("senses:\n  a:\n    enabled: false\n")


def test_set_enabled_workflow(home: Path) -> None:
    write(home, "workflows:\n  cleanup: {concurrency: 1}\n")
    edit.set_enabled(home, "workflow", "cleanup", False)
    assert not load_config(home).workflows["cleanup"].enabled


def test_invalid_edit_is_refused_and_the_file_untouched(home: Path) -> None:
    path = write(home, COMMENTED)
    before = path.read_bytes(), path.stat().st_mtime_ns
    with pytest.raises(ConfigError) as caught:
        edit.add_sense(home, "net", {"throttle": 5})
    assert "edit refused" in str(caught.value)
    assert [p.path for p in caught.value.problems] == ["senses.net.throttle"]
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in home.iterdir()) == ["nerve.yaml"]  # no temp file left behind


def test_edit_of_an_already_invalid_file_says_fix_it_first(home: Path) -> None:
    path = write(home, "senses:\n  a: {throttle: 1}\n")
    with pytest.raises(ConfigError, match="already invalid"):
        edit.add_sense(home, "b", {})
    assert path.read_text() == "senses:\n  a: {throttle: 1}\n"


def test_exception_inside_the_block_writes_nothing(home: Path) -> None:
    path = write(home, COMMENTED)
    with pytest.raises(RuntimeError):
        with edit.edit_config(home) as doc:
            doc["senses"]["x"] = {}
            raise RuntimeError("changed my mind")
    assert path.read_text() == COMMENTED


def test_edit_config_can_make_several_changes_at_once(home: Path) -> None:
    path = write(home, COMMENTED)
    with edit.edit_config(home) as doc:
        doc["engine"]["max_rounds"] = 20
        doc["senses"]["disk-usage"]["throttle"] = "1m"
    text = path.read_text()
    assert "  max_rounds: 20   # lower than the default on purpose\n" in text
    assert load_config(home).senses["disk-usage"].throttle == 60


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda h: edit.add_sense(h, "cpu-percent", {}), "already in nerve.yaml"),
        (lambda h: edit.add_sense(h, "Bad Name", {}), "invalid sense name"),
        (lambda h: edit.add_workflow(h, "../etc", {}), "invalid workflow name"),
        (lambda h: edit.set_enabled(h, "sense", "cpu-percnt", False), "did you mean `cpu-percent`"),
        (lambda h: edit.set_enabled(h, "reflex", 7, False), r"no reflexes\[7\]"),
        (lambda h: edit.set_enabled(h, "workflow", "cleanup", False), "no workflow `cleanup`"),
    ],
)
def test_bad_requests_are_refused_with_a_clear_message(home: Path, call, message: str) -> None:
    path = write(home, COMMENTED)
    with pytest.raises(NerveError, match=message):
        call(home)
    assert path.read_text() == COMMENTED


def test_missing_section_is_created_in_canonical_order(home: Path) -> None:
    path = write(home, "engine:\n  max_rounds: 10\n\n# when things run\nreflexes: []\n")
    edit.add_sense(home, "a", {"group": "g"}, reflex={"interval": "1m"})
    text = path.read_text()
    assert text.index("senses:") < text.index("# when things run") < text.index("reflexes:")
    assert validate(text).valid
    assert load_config(home).reflexes[0].sense == "a"


def test_empty_file_gets_its_first_sense(home: Path) -> None:
    write(home, "")
    edit.add_sense(home, "a", {"throttle": "1s"}, reflex={"interval": "5s"})
    config = load_config(home)
    assert config.senses["a"].throttle == 1 and config.reflexes[0].interval == 5


def test_the_files_own_indentation_is_kept(home: Path) -> None:
    text = "senses:\n    a: {}\nreflexes:\n- sense: a\n  interval: 1m\n"
    path = write(home, text)
    edit.add_sense(home, "b", {}, reflex={"interval": "2m"})
    assert path.read_text() == "senses:\n    a: {}\n    b: {}\nreflexes:\n- sense: a\n  interval: 1m\n- sense: b\n  interval: 2m\n"


def test_write_atomic_keeps_the_file_mode(home: Path) -> None:
    path = write(home, "senses: {}\n")
    path.chmod(0o640)
    edit.add_sense(home, "a", {})
    assert path.stat().st_mode & 0o777 == 0o640
