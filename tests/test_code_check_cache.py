"""`nerve config check` imports the code again only when something the answer depends on changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from enginekit import write_instance, write_sense
from typer.testing import CliRunner

from nerve_cli.cli import output
from nerve_cli.cli.app import app

CONFIG = """
    senses:
      good: {}
      broken: {}
    reflexes: []
"""
# every import of `good` appends a line to the mark file: the number of lines is the number of imports
GOOD = """
    import os
    with open(os.environ["NERVE_TEST_MARK"], "a") as mark:
        mark.write("imported\\n")

    def compute(db, peers):
        return 1
"""
BROKEN = "def compute(db, peers)\n    return 1\n"
FIXED = "def compute(db, peers):\n    return 1\n"  # as long as BROKEN: a content change, not a size change


@pytest.fixture()
def mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "imports"
    monkeypatch.setenv("NERVE_TEST_MARK", str(path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return path


def check(home: Path, *args: str) -> dict:
    output.reset()
    result = CliRunner().invoke(app, ["config", "check", "--json", "--home", str(home), *args])
    output.reset()
    return json.loads(result.stdout)


def imports(mark: Path) -> int:
    return len(mark.read_text().splitlines()) if mark.exists() else 0


def code_problems(doc: dict) -> list[str]:
    return [p["file"] for p in doc["problems"] if p["file"] != "nerve.yaml"]


def test_nothing_changed_nothing_imported_and_the_same_answer(home: Path, mark: Path) -> None:
    write_instance(home, CONFIG, {"good": GOOD, "broken": BROKEN})
    first = check(home)
    assert imports(mark) == 1 and code_problems(first) == ["senses/broken/sense.py"]
    again = check(home)
    assert imports(mark) == 1  # the kept answer
    assert again == first
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text() + "# a comment\n")
    assert check(home) == first and imports(mark) == 1  # nerve.yaml only picks what is checked
    assert check(home, "--no-cache") == first and imports(mark) == 2


def test_a_changed_file_is_imported_again(home: Path, mark: Path) -> None:
    write_instance(home, CONFIG, {"good": GOOD, "broken": BROKEN})
    assert code_problems(check(home)) == ["senses/broken/sense.py"]
    write_sense(home, "broken", FIXED)  # same size, likely the same mtime tick: the content decides
    fixed = check(home)
    assert imports(mark) == 2 and fixed["valid"] and code_problems(fixed) == []
    (home / "senses" / "good" / "helper.py").write_text("X = 1\n")  # any file a sense could import
    assert check(home)["valid"] and imports(mark) == 3


def test_the_environment_and_the_senses_asked_for_count(home: Path, mark: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_instance(home, CONFIG, {"good": GOOD, "broken": BROKEN})
    check(home)
    monkeypatch.setenv("NERVE_SOME_SETTING", "1")  # a sense may read it at import
    check(home)
    assert imports(mark) == 2
    check(home)
    assert imports(mark) == 2
    (home / "nerve.yaml").write_text(CONFIG.replace("good: {}", "good: {enabled: false}").replace("    ", "", 1)
                                     .replace("\n    ", "\n"))
    doc = check(home)  # `good` is no longer asked for: the kept answer of `broken` is enough
    assert imports(mark) == 2 and code_problems(doc) == ["senses/broken/sense.py"]


def test_an_unwritable_cache_is_no_cache(home: Path, mark: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    write_instance(home, CONFIG, {"good": GOOD, "broken": BROKEN})
    assert code_problems(check(home)) == ["senses/broken/sense.py"]
    assert code_problems(check(home)) == ["senses/broken/sense.py"]
    assert imports(mark) == 2


def test_links_out_of_the_instance_and_special_files_are_never_read(home: Path, mark: Path, tmp_path: Path) -> None:
    """`notes.txt -> /dev/zero` grew config check to 2 GB, and a FIFO or a link to `/` hung it: only regular
    files inside the instance are read; a link out counts by where it points (its target's time and size),
    so a change there still counts, and a linked folder inside the instance is still followed."""
    import os
    import subprocess
    import sys
    import time

    write_instance(home, CONFIG, {"good": GOOD, "broken": BROKEN})
    (home / "notes.txt").symlink_to("/dev/zero")
    (home / "root").symlink_to("/")
    os.mkfifo(home / "senses" / "good" / "pipe")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "lib.py").write_text("X = 1\n")
    (home / "senses" / "good" / "lib").symlink_to(shared)
    (home / "senses" / "mine").mkdir()
    (home / "senses" / "mine" / "helper.py").write_text("Y = 1\n")
    (home / "senses" / "good" / "mine").symlink_to(home / "senses" / "mine")
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "nerve_cli", "config", "check", "--json", "--home", str(home)],
                         capture_output=True, text=True, timeout=30, env=os.environ)
    assert time.monotonic() - started < 15
    assert code_problems(json.loads(run.stdout)) == ["senses/broken/sense.py"], run.stderr
    assert imports(mark) == 1
    check(home)
    assert imports(mark) == 1  # the same fingerprint: the answer kept
    (home / "senses" / "mine" / "helper.py").write_text("Y = 2\n")  # through a link inside: read, by content
    check(home)
    assert imports(mark) == 2
    os.utime(shared, ns=(time.time_ns(), time.time_ns() + 10**9))  # the linked-out folder changed
    check(home)
    assert imports(mark) == 3
