"""The path patterns of file reflexes (`paths:` in a reflex): what they match, and where to watch for it.

A pattern is a glob: `*` and `?` and `[abc]` match within one path segment,
`**` matches any number of segments (zero included). A relative pattern is
relative to the instance folder; `~` is the user's home. A pattern without a
wildcard names one file. Matching is done on whole paths, segment by segment,
the same way for the start-up scan and for the watcher, so both agree on what
a pattern covers.

The *root* of a pattern is its leading run of literal segments: the folder
that is watched (recursively only when the pattern reaches below its first
level) and walked at start-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

WILDCARDS = frozenset("*?[")


def _wild(segment: str) -> bool:
    return any(c in WILDCARDS for c in segment)


@dataclass(frozen=True)
class PathPattern:
    text: str  # as written in nerve.yaml
    root: str  # the absolute folder its matches lie under
    parts: tuple[str, ...]  # the segments below `root`, wildcards and all

    @property
    def recursive(self) -> bool:
        """Whether a match may lie deeper than directly inside `root`."""
        return len(self.parts) > 1 or "**" in self.parts

    @property
    def single_file(self) -> bool:
        return len(self.parts) == 1 and not _wild(self.parts[0])

    def matches(self, path: str | Path) -> bool:
        """Whether an absolute path is one this pattern names."""
        rel = _below(str(path), self.root)
        return rel is not None and _match(self.parts, tuple(rel))

    def may_contain(self, folder: str | Path) -> bool:
        """Whether something inside `folder` (an absolute path) could match: for pruning a walk, and for refusing
        a pattern that reaches into the instance's own data/."""
        folder = os.path.normpath(str(folder))
        if folder == os.path.normpath(self.root):
            return bool(self.parts)
        rel = _below(folder, self.root)
        if rel is not None:
            return _prefix(self.parts, tuple(rel))
        return _below(self.root, folder) is not None  # the root itself lies inside `folder`


def resolve(text: str, home: Path) -> PathPattern:
    """`notes/**/*.md` (relative to the instance), `~/inbox/*.pdf` or `/var/log/syslog` → its PathPattern."""
    expanded = os.path.expanduser(text)
    absolute = expanded if os.path.isabs(expanded) else os.path.join(str(home), expanded)
    segments = [s for s in os.path.normpath(absolute).split(os.sep) if s]
    literal = 0
    while literal < len(segments) - 1 and not _wild(segments[literal]):
        literal += 1
    root = os.sep + os.sep.join(segments[:literal])
    return PathPattern(text, root, tuple(segments[literal:]))


def _below(path: str, folder: str) -> list[str] | None:
    """The segments of `path` under `folder`, or None when it is not under it (or is it)."""
    folder = folder.rstrip(os.sep) or os.sep
    if folder == os.sep:
        rest = path.lstrip(os.sep)
    elif path.startswith(folder + os.sep):
        rest = path[len(folder) + 1:]
    else:
        return None
    return [s for s in rest.split(os.sep) if s] or None


@lru_cache(maxsize=4096)
def _match(parts: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not parts:
        return not path
    head, rest = parts[0], parts[1:]
    if head == "**":
        return any(_match(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and _match(rest, path[1:])


@lru_cache(maxsize=4096)
def _prefix(parts: tuple[str, ...], folder: tuple[str, ...]) -> bool:
    """Whether some path inside the folder `folder` (segments) could match `parts`."""
    if not folder:
        return bool(parts)
    if not parts:
        return False
    head, rest = parts[0], parts[1:]
    if head == "**":
        return True
    return fnmatchcase(folder[0], head) and _prefix(rest, folder[1:])
