"""Nerve's commits hold only what Nerve changed, in one message style, and leave `git status` clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import cli


def git(home: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(home), *args], capture_output=True, text=True, check=True).stdout


def files_of(home: Path, rev: str) -> list[str]:
    return git(home, "show", "--name-only", "--format=", rev).split()


def subjects(home: Path) -> list[str]:
    return git(home, "log", "--format=%s").splitlines()


def test_sense_migrate_commits_schema_py_with_its_migration(home: Path) -> None:
    assert cli("init").exit_code == 0
    schema = home / "senses/cpu-percent/schema.py"
    schema.write_text(schema.read_text() + "    note: str | None = None\n")
    result = cli("sense", "migrate", "cpu-percent")
    assert result.exit_code == 0, result.output
    assert git(home, "status", "--porcelain") == ""
    assert files_of(home, "HEAD") == ["senses/cpu-percent/migrations/0002_add_note.sql", "senses/cpu-percent/schema.py"]
    assert subjects(home)[0] == "nerve: sense migrate cpu-percent (0002_add_note.sql)"


def test_a_nerve_commit_never_carries_an_unrelated_hand_edit(home: Path) -> None:
    assert cli("init").exit_code == 0
    config = home / "nerve.yaml"
    config.write_text(config.read_text().replace("timeout: 5s", "timeout: 4s", 1))  # a hand edit, not committed
    (home / "senses/cpu-percent/sense.py").write_text("def compute(db, peers):\n    return 2\n")  # untouched by nerve
    result = cli("sense", "disable", "disk-usage")
    assert result.exit_code == 0, result.output
    assert "nerve.yaml had uncommitted edits: committed them first, on their own" in result.stderr
    nerve_commit, hand_commit = subjects(home)[:2]
    assert nerve_commit == "nerve: sense disable disk-usage (+1 by cascade)"
    assert hand_commit == "edits to nerve.yaml made outside Nerve, committed before `nerve sense disable disk-usage`"
    hand_diff = git(home, "show", "HEAD~1", "--format=", "--unified=0")
    assert "timeout: 4s" in hand_diff and "enabled: false" not in hand_diff
    nerve_diff = git(home, "show", "HEAD", "--format=", "--unified=0")
    assert "timeout: 4s" not in nerve_diff and "timeout: 5s" not in nerve_diff and "enabled: false" in nerve_diff
    assert git(home, "status", "--porcelain").split() == ["M", "senses/cpu-percent/sense.py"]  # left alone


def test_every_command_uses_one_message_style(home: Path) -> None:
    assert cli("init").exit_code == 0
    assert cli("sense", "new", "open-prs").exit_code == 0
    assert cli("workflow", "new", "triage").exit_code == 0
    assert cli("sense", "disable", "open-prs").exit_code == 0
    assert cli("sense", "enable", "open-prs").exit_code == 0
    assert cli("workflow", "disable", "triage").exit_code == 0
    assert subjects(home) == [
        "nerve: workflow disable triage",
        "nerve: sense enable open-prs (+1 restored)",  # its own reflex comes back with it
        "nerve: sense disable open-prs (+1 by cascade)",
        "nerve: workflow new triage",
        "nerve: sense new open-prs",
        "nerve: init",
    ]
    assert git(home, "status", "--porcelain") == ""
