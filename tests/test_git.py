"""The instance git helper, on real repos: commit only given paths, fallback identity, dirty check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nerve_cli.instance import git


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git config: no user.name / user.email anywhere."""
    fake_home = tmp_path / "fake-user-home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def repo(tmp_path: Path, no_identity: None) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git.init_repo(path)
    run_git(path, "config", "user.name", "Ada")
    run_git(path, "config", "user.email", "ada@example.com")
    (path / ".gitignore").write_text("data/\n")
    git.commit(path, [".gitignore"], "ignore data")
    return path


def test_commit_only_the_given_paths_and_leave_other_staged_work_alone(repo: Path) -> None:
    (repo / "mine.txt").write_text("mine\n")
    (repo / "theirs.txt").write_text("theirs\n")
    run_git(repo, "add", "theirs.txt")
    sha = git.commit(repo, [repo / "mine.txt"], "add mine")
    assert sha == run_git(repo, "rev-parse", "HEAD").strip()
    assert run_git(repo, "show", "--name-only", "--format=%s", "HEAD").split() == ["add", "mine", "mine.txt"]
    assert run_git(repo, "status", "--porcelain").splitlines() == ["A  theirs.txt"]


def test_commit_uses_the_repos_identity(repo: Path) -> None:
    assert git.uses_fallback_identity(repo) is False
    (repo / "a").write_text("a")
    git.commit(repo, ["a"], "a")
    assert run_git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Ada <ada@example.com>"


def test_commit_without_identity_uses_the_fallback(tmp_path: Path, no_identity: None) -> None:
    path = tmp_path / "bare"
    path.mkdir()
    git.init_repo(path)
    assert git.uses_fallback_identity(path) is True
    (path / "a").write_text("a")
    assert git.commit(path, ["a"], "first") is not None
    assert run_git(path, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        "Nerve <nerve@localhost>|Nerve <nerve@localhost>"
    )


def test_nothing_to_commit_returns_none(repo: Path) -> None:
    head = run_git(repo, "rev-parse", "HEAD")
    assert git.commit(repo, [".gitignore"], "again") is None
    assert run_git(repo, "rev-parse", "HEAD") == head


def test_not_a_repo_returns_none(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    assert git.is_repo(tmp_path) is False
    assert git.commit(tmp_path, ["a"], "x") is None
    assert git.is_dirty(tmp_path) is False


def test_deleting_and_changing_files_commits(repo: Path) -> None:
    (repo / "sub").mkdir()
    (repo / "sub" / "a.py").write_text("1\n")
    (repo / "sub" / "b.py").write_text("1\n")
    git.commit(repo, ["sub"], "add sub")
    (repo / "sub" / "a.py").unlink()
    (repo / "sub" / "b.py").write_text("2\n")
    assert git.commit(repo, ["sub"], "change sub")
    assert run_git(repo, "show", "--name-status", "--format=", "HEAD").split() == ["D", "sub/a.py", "M", "sub/b.py"]
    assert git.is_dirty(repo) is False


def test_paths_outside_the_instance_are_refused(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="outside the instance"):
        git.commit(repo, [tmp_path / "elsewhere.txt"], "x")


def test_is_dirty(repo: Path) -> None:
    assert git.is_dirty(repo) is False
    (repo / "data").mkdir()
    (repo / "data" / "logs.db").write_text("ignored")
    assert git.is_dirty(repo) is False
    (repo / "new.py").write_text("x")
    assert git.is_dirty(repo) is True
    assert git.is_dirty(repo, untracked=False) is False
    git.commit(repo, ["new.py"], "new")
    (repo / "new.py").write_text("y")
    assert git.is_dirty(repo, untracked=False) is True


def test_init_repo_twice_is_harmless(repo: Path) -> None:
    head = run_git(repo, "rev-parse", "HEAD")
    git.init_repo(repo)
    assert run_git(repo, "rev-parse", "HEAD") == head
