"""The code check's answers, kept between runs while nothing they depend on has changed.

Importing every enabled sense and workflow in a child is most of `nerve config
check` (a second at 1,000 senses). Its answer for a sense or workflow depends on
the instance's files, on Nerve, on the installed packages, the Python running it
and its environment, so the answers are kept under one fingerprint of all of
these and used only while the fingerprint is unchanged:

- every file of the instance but nerve.yaml (which only picks what is checked),
  `data/`, `attic/` and hidden ones, by content (over 1 MiB by size and time): a
  sense may import another sense's modules or any file of the instance. Only
  regular files are read (a FIFO or a device in the instance is counted by its
  name and kind, never opened); a link is followed while it stays inside the
  instance, and a link leading out of it counts by where it points and that
  target's time and size (never read or walked: a link to `/` or `/dev/zero`
  costs nothing);
- Nerve's own modules, the interpreter, its version and every `site-packages`
  folder of its path (a folder's time changes when a package is installed or
  removed), by path, time and size;
- the environment (a sense may read a variable at import), but for the shell's
  own bookkeeping (PWD, OLDPWD, SHLVL, `_`, COLUMNS, LINES).

The answers live in `$XDG_CACHE_HOME/nerve/code-check/` (else `~/.cache/...`), one
file per instance folder, outside the instance: the check never writes into it.
A file that cannot be read or written is the same as none.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from stat import S_ISREG
from typing import Any, Iterator

import orjson

from nerve_cli.atomicfile import write_atomic

VERSION = 1
SKIPPED_TOP = {"data", "attic", "nerve.yaml"}
HASHED_SIZE = 1 << 20  # larger files (data kept beside the code) count by size and time, not content
SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES"}
Item = dict[str, Any]  # one problem as the child reports it: {kind, name, type, message, file, line, ...}


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nerve" / "code-check"


class CodeCache:
    """The answers kept for one instance folder: (kind, name) → its problems ([] when it loads)."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home).resolve()
        self.path = cache_folder() / (hashlib.sha256(str(self.home).encode()).hexdigest()[:24] + ".json")
        self.key = fingerprint(self.home)
        self.answers: dict[str, list[Item]] = {}
        try:
            kept = orjson.loads(self.path.read_bytes())
            if kept.get("version") == VERSION and kept.get("key") == self.key:
                self.answers = dict(kept["answers"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass

    def answer(self, senses: list[str], workflows: list[str]) -> list[Item] | None:
        """The problems of exactly these, in the child's order; None if one of them is not kept."""
        found: list[Item] = []
        for entry in _entries(senses, workflows):
            if entry not in self.answers:
                return None
            found += self.answers[entry]
        return found

    def keep(self, senses: list[str], workflows: list[str], problems: list[Item]) -> None:
        """What a child answered about these; written at once, atomically (a failed write keeps nothing)."""
        by_entry: dict[str, list[Item]] = {entry: [] for entry in _entries(senses, workflows)}
        for item in problems:
            entry = f"{item.get('kind')}:{item.get('name')}"
            if entry not in by_entry:
                return  # an answer about something not asked for: not one to keep
            by_entry[entry].append(item)
        self.answers.update(by_entry)
        data = orjson.dumps({"version": VERSION, "home": str(self.home), "key": self.key, "answers": self.answers})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, data, 0o600)
        except OSError:
            pass  # no folder to hold it: nothing was written


def _entries(senses: list[str], workflows: list[str]) -> list[str]:
    return [f"sense:{n}" for n in senses] + [f"workflow:{n}" for n in workflows]


def fingerprint(home: Path) -> str:
    """One hash of everything a code check's answer depends on (see the module doc)."""
    digest = hashlib.sha256()
    digest.update(f"{VERSION}\0{sys.executable}\0{sys.version}\0".encode())
    for name, value in sorted(os.environ.items()):
        if name not in SHELL_VARIABLES:
            digest.update(f"env\0{name}\0{value}\0".encode())
    for name, kind, stat, content in _instance_files(home):
        stamp = stat.st_mtime_ns if kind != "file" or stat.st_size > HASHED_SIZE else 0
        digest.update(f"{kind}\0{name}\0{stat.st_size}\0{stamp}\0".encode())
        digest.update(content)
    for where, stat in _stamps():
        digest.update(f"stamp\0{where}\0{stat.st_mtime_ns}\0{stat.st_size}\0".encode())
    return digest.hexdigest()


def _instance_files(home: Path) -> Iterator[tuple[str, str, os.stat_result, bytes]]:
    """(name in the instance, kind, stat, content) of the instance's files in a stable order, without data/,
    attic/, nerve.yaml, hidden folders and caches. Kind: `file` (content read when at most HASHED_SIZE),
    `outside` (a link leading out of the instance: its target, by time and size), `special` (neither read
    nor followed). Linked folders inside the instance are followed, once each."""
    base = os.path.realpath(home)
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(str(home), followlinks=True):
        here = os.stat(root)
        if (here.st_dev, here.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((here.st_dev, here.st_ino))
        top = root == str(home)
        kept = []
        for d in sorted(dirs):
            if d.startswith(".") or d == "__pycache__" or (top and d in SKIPPED_TOP):
                continue
            path = os.path.join(root, d)
            if os.path.islink(path) and not _inside(os.path.realpath(path), base):
                entry = _outside(home, path)
                if entry is not None:
                    yield entry
                continue
            kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            if not (top and name in SKIPPED_TOP) and not name.startswith("."):
                entry = _file(home, os.path.join(root, name), base)
                if entry is not None:
                    yield entry


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base + os.sep)


def _outside(home: Path, path: str) -> tuple[str, str, os.stat_result, bytes] | None:
    try:
        return Path(path).relative_to(home).as_posix(), "outside", os.stat(path), os.readlink(path).encode()
    except OSError:
        return None


def _file(home: Path, path: str, base: str) -> tuple[str, str, os.stat_result, bytes] | None:
    """A file's entry; opened only when it is a regular file inside the instance, without blocking (a FIFO
    put in its place between the look and the open is not waited on)."""
    if os.path.islink(path) and not _inside(os.path.realpath(path), base):
        return _outside(home, path)
    name = Path(path).relative_to(home).as_posix()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        try:
            return name, "special", os.stat(path), b""
        except OSError:
            return None
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            return name, "special", stat, b""
        if stat.st_size > HASHED_SIZE:
            return name, "file", stat, b""
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return name, "file", stat, handle.read(HASHED_SIZE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stamps() -> Iterator[tuple[str, os.stat_result]]:
    """Nerve's own modules and the package folders the child imports from: path, time and size."""
    import nerve_cli

    package = Path(nerve_cli.__file__).parent
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                yield path, os.stat(path)
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
            yield entry, os.stat(entry)
