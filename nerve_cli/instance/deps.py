"""`nerve deps`: is the instance's requirements.txt satisfied where the workers run?

Workers run with the interpreter that runs Nerve (`sys.executable`), so that is
the environment checked, and the one `nerve deps install` installs into (with
its own pip). Requirements are PEP 508 lines; pip options (`-r`, `-e`,
`--index-url`, ...) and direct references are passed to pip as they are but
cannot be checked here, so they are listed as such.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nerve_cli.errors import NerveError

REQUIREMENTS = "requirements.txt"


@dataclass(frozen=True)
class Requirement:
    line: int
    text: str
    name: str = ""
    wanted: str = ""  # the version specifier, e.g. ">=2.0"
    installed: str | None = None
    state: str = "ok"  # ok | missing | wrong-version | not-needed (marker false) | unchecked

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "not-needed", "unchecked")

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "requirement": self.text, "name": self.name, "wanted": self.wanted,
                "installed": self.installed, "state": self.state}


def requirements_path(home: Path) -> Path:
    return Path(home) / REQUIREMENTS


def check(home: Path) -> list[Requirement]:
    """Each requirement line of requirements.txt, checked against this interpreter's installed packages."""
    path = requirements_path(home)
    if not path.is_file():
        return []
    return [_check(number, text) for number, text in _lines(path)]


def _lines(path: Path) -> list[tuple[int, str]]:
    out = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if text:
            out.append((number, text))
    return out


def _check(number: int, text: str) -> Requirement:
    # ≈ 60 ms (packaging) + 20 ms: paid only when there is a requirements.txt to check (config check reads it)
    from importlib import metadata

    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Parsed

    if text.startswith("-"):
        return Requirement(number, text, state="unchecked")
    try:
        req = Parsed(text)
    except InvalidRequirement as exc:
        raise NerveError(f"{REQUIREMENTS}:{number}: {text!r} is not a requirement pip understands ({exc})") from None
    wanted = str(req.specifier)
    if req.marker is not None and not req.marker.evaluate():
        return Requirement(number, text, req.name, wanted, state="not-needed")
    try:
        installed = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return Requirement(number, text, req.name, wanted, state="missing")
    if req.url:
        return Requirement(number, text, req.name, wanted, installed, "unchecked")
    fits = not req.specifier or req.specifier.contains(installed, prereleases=True)
    return Requirement(number, text, req.name, wanted, installed, "ok" if fits else "wrong-version")


def install(home: Path) -> subprocess.CompletedProcess:
    """`python -m pip install -r requirements.txt` with the workers' interpreter; pip's output passes through."""
    path = requirements_path(home)
    if not path.is_file():
        raise NerveError(f"{path} does not exist; list the packages your senses import there, one per line")
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise NerveError(f"pip is not available for {sys.executable} (the interpreter the workers use); "
                         f"install the packages another way, e.g. `uv pip install --python {sys.executable} -r {path}`")
    return subprocess.run([sys.executable, "-m", "pip", "install", "-r", str(path)], cwd=str(home))
