"""The suite runs as on a fresh machine: an empty HOME, no git identity, bytecode as Python's default.

conftest.py sets this up for every test process; these tests fail the moment a
machine's own git identity or home folder could leak into a test again, and
show that the commands that commit work without an identity.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from enginekit import nerve

from nerve_cli.usercode import import_file


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def test_no_git_identity_reaches_the_tests(tmp_path: Path) -> None:
    assert git(tmp_path, "init", "-q").returncode == 0
    for key in ("user.name", "user.email"):
        found = git(tmp_path, "config", "--get", key)
        assert found.returncode == 1, f"git has {key} = {found.stdout.strip()!r}: the suite must run without one"
    assert not {v for v in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "EMAIL") if v in os.environ}
    home = Path(os.environ["HOME"])
    # conftest makes HOME an empty folder of its own; what Nerve itself caches there (config check's
    # answers under .cache) may appear as tests run, a git or shell configuration never.
    assert home.name.startswith("home-") and home.parent == Path(tempfile.gettempdir()), f"HOME is {home}: never the user's own"
    assert not {".gitconfig", ".config/git", ".bashrc", ".profile"} & {str(p.relative_to(home)) for p in home.rglob("*")}
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ  # children write and trust bytecode: Python's default


def test_commands_that_commit_work_without_an_identity(home: Path) -> None:
    assert nerve("init", home=home).returncode == 0
    result = nerve("sense", "new", "disk-free", home=home)
    assert result.returncode == 0, result.stderr
    assert git(home, "log", "-1", "--format=%an <%ae> %s").stdout.strip() == \
        "Nerve <nerve@localhost> nerve: sense new disk-free"
    assert git(home, "status", "--porcelain").stdout == ""


def test_user_code_edited_twice_in_one_second_runs_the_new_code(tmp_path: Path) -> None:
    """A .pyc is trusted by mtime in whole seconds and size: `str` → `int` keeps both, and must still be seen."""
    source = tmp_path / "sense.py"
    seen = []
    for kind in ("str", "int"):
        source.write_text(f"KIND = {kind!r}\n")
        os.utime(source, (1_700_000_000, 1_700_000_000))  # the same second, as two quick saves
        seen.append(import_file("_nerve_test_stale.sense", source).KIND)
    assert seen == ["str", "int"]
