"""`nerve init`: copy templates/instance/ into a new folder, make it a git repo, first commit.

The instance is assembled in a hidden sibling folder and moved into place with
one rename, so a failure half-way leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.instance import git

FIRST_COMMIT = "nerve: init"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "data", ".venv")


class InstanceExists(NerveError):
    """`nerve init` refused: the folder is already an instance or holds other files."""

    type = ErrorType.INSTANCE_EXISTS


@dataclass(frozen=True)
class InitResult:
    home: Path
    sha: str | None
    fallback_identity: bool  # the first commit used `Nerve <nerve@localhost>`
    files: tuple[str, ...]


def templates_dir(kind: str = "instance") -> Path:
    """`templates/<kind>/`, shipped inside the package (`nerve_cli/templates` links to the top-level folder)."""
    root = Path(__file__).resolve().parent.parent / "templates" / kind
    if not root.is_dir():
        raise NerveError(f"Nerve's templates are missing: {root} does not exist; reinstall nerve-cli")
    return root


def check_target(home: Path) -> None:
    """Refuse a folder that is already an instance, or that holds anything at all."""
    if (home / "nerve.yaml").exists():
        raise InstanceExists(f"{home} is already a Nerve instance (it has a nerve.yaml); nothing was changed")
    if home.exists() and not home.is_dir():
        raise InstanceExists(f"{home} exists and is not a folder; choose another --home")
    entries = sorted(p.name for p in home.iterdir()) if home.is_dir() else []
    if entries:
        shown = ", ".join(entries[:8]) + (f" and {len(entries) - 8} more" if len(entries) > 8 else "")
        raise InstanceExists(
            f"{home} is not empty and is not a Nerve instance (it holds {shown}); "
            "choose an empty or new folder with --home; nothing was changed"
        )


def create_instance(home: Path, *, template: Path | None = None) -> InitResult:
    """Create an instance at `home` from the template, with a first commit."""
    home = Path(home).expanduser().absolute()
    check_target(home)
    home.parent.mkdir(parents=True, exist_ok=True)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{home.name}.nerve-init-", dir=home.parent))
    except PermissionError:
        if not home.is_dir():
            raise
        return _build_in_place(home, template)  # an empty folder we may write in, inside one we may not
    try:
        result = _build(staging / "instance", home, template)
        os.replace(staging / "instance", home)  # also replaces an empty folder; git stores no absolute paths
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def _build(build: Path, home: Path, template: Path | None) -> InitResult:
    shutil.copytree(template or templates_dir(), build, ignore=_IGNORED, dirs_exist_ok=True)
    files = tuple(sorted(p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file()))
    git.init_repo(build)
    fallback = git.uses_fallback_identity(build)
    sha = git.commit(build, ["."], FIRST_COMMIT)
    return InitResult(home, sha, fallback, files)


def _build_in_place(home: Path, template: Path | None) -> InitResult:
    try:
        return _build(home, home, template)
    except BaseException:
        for child in home.iterdir():  # it was empty before: leave it empty again
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        raise
