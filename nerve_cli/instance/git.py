"""The instance folder is a git repo: init, commit exactly the paths a command changed, dirty check.

GitPython costs ~145 ms to import, so it is imported inside each function.
With no git identity configured, commits are made as `Nerve <nerve@localhost>`
(never silently as root@hostname) and `uses_fallback_identity()` tells the CLI
to say so.
"""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nerve_cli.errors import NerveError

if TYPE_CHECKING:
    from git import Repo

FALLBACK_NAME = "Nerve"
FALLBACK_EMAIL = "nerve@localhost"
HOW_TO_SET_IDENTITY = (
    'set your own with `git config --global user.name "Your Name"` and '
    "`git config --global user.email you@example.com`"
)


def _repo(home: Path) -> "Repo":
    import git

    return git.Repo(Path(home))


def is_repo(home: Path) -> bool:
    """True when `home` itself is the top of a git work tree."""
    return (Path(home) / ".git").exists()


def init_repo(home: Path) -> None:
    """`git init` in `home` (a no-op when it already is a repo)."""
    import git

    if not is_repo(home):
        git.Repo.init(Path(home))


def uses_fallback_identity(home: Path) -> bool:
    """True when git has no user.name/user.email for this repo, so commits use `Nerve <nerve@localhost>`."""
    import git

    repo = _repo(home)
    for key in ("user.name", "user.email"):
        try:
            if not repo.git.config("--get", key).strip():
                return True
        except git.GitCommandError:
            return True
    return False


def person(home: Path) -> str:
    """Who is acting, for the record (an answer to a thread, a thread started by hand): git's user.name for
    the instance (its own config, else the global one), else the login name, else "unknown"."""
    try:
        found = subprocess.run(["git", "-C", str(home), "config", "--get", "user.name"], capture_output=True,
                               text=True, timeout=10)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass  # no git here: the login name says who
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no USER/LOGNAME (a bare container)
        return "unknown"


def _identity_env(home: Path) -> dict[str, str]:
    if not uses_fallback_identity(home):
        return {}
    return {
        "GIT_AUTHOR_NAME": FALLBACK_NAME,
        "GIT_AUTHOR_EMAIL": FALLBACK_EMAIL,
        "GIT_COMMITTER_NAME": FALLBACK_NAME,
        "GIT_COMMITTER_EMAIL": FALLBACK_EMAIL,
    }


def _relative(home: Path, paths: Iterable[Path | str]) -> list[str]:
    home = Path(home).resolve()
    out = []
    for p in paths:
        path = Path(p)
        path = path if path.is_absolute() else home / path
        try:
            out.append(path.resolve().relative_to(home).as_posix() or ".")
        except ValueError:
            raise NerveError(f"cannot commit {p}: it is outside the instance folder {home}") from None
    return out


def commit(home: Path, paths: list[Path | str], message: str) -> str | None:
    """Commit exactly `paths` (added, changed or deleted) with `message`; return the new sha.

    Anything else the user has staged stays staged and out of this commit.
    Returns None when those paths hold no change, or when `home` is not a git repo
    (check `is_repo`).
    """
    import git

    if not is_repo(home) or not paths:
        return None
    repo = _repo(home)
    rel = _relative(home, paths)
    try:
        repo.git.add("--all", "--", *rel)
        if not _staged(repo, rel):
            return None
        repo.git.commit("-m", message, "--only", "--", *rel, env=_identity_env(home))
    except git.GitCommandError as exc:
        detail = (exc.stderr or str(exc)).strip().splitlines()
        raise NerveError(f"git commit in {home} failed: {detail[-1] if detail else exc}") from None
    return repo.head.commit.hexsha


def _staged(repo: "Repo", rel: list[str]) -> bool:
    """Whether the index differs from HEAD (or from nothing, before the first commit) under `rel`."""
    if not repo.head.is_valid():
        return bool(repo.git.ls_files("--cached", "--", *rel).strip())
    return bool(repo.git.diff("--cached", "--name-only", "--", *rel).strip())


def is_dirty(home: Path, *, untracked: bool = True) -> bool:
    """Uncommitted changes in the instance (untracked files count unless `untracked=False`).

    `data/` is gitignored, so engine output never makes the instance dirty.
    """
    if not is_repo(home):
        return False
    return _repo(home).is_dirty(untracked_files=untracked)


def changed_paths(home: Path, paths: Sequence[Path | str]) -> list[str]:
    """Files under `paths` that differ from HEAD (staged or not, deleted, or untracked); [] without a HEAD."""
    import git

    if not is_repo(home) or not paths:
        return []
    repo = _repo(home)
    if not repo.head.is_valid():
        return []
    rel = _relative(home, paths)
    try:
        tracked = repo.git.diff("HEAD", "--name-only", "--no-renames", "--", *rel).splitlines()
        untracked = repo.git.ls_files("--others", "--exclude-standard", "--", *rel).splitlines()
    except git.GitCommandError as exc:
        raise NerveError(f"git status in {home} failed: {(exc.stderr or str(exc)).strip()}") from None
    return sorted({p for p in tracked + untracked if p})
