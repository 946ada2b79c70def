"""Archive files: daily JSON-lines files written whole-or-absent, and read back tolerantly.

Names are `YYYY-MM-DD.jsonl` (a day's rows) and `YYYY-MM-DD.N.jsonl`
(N ≥ 2: rows of that day archived later, e.g. a thread that was still live).
A file is written as `<name>.tmp`, fsynced, and renamed only after the
database has committed the deletion of its rows (see store/archive.py).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

NAME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\.(\d+))?\.jsonl\Z")
TMP_SUFFIX = ".tmp"


@dataclass(frozen=True, order=True)
class ArchiveFile:
    day: str
    part: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.name


def file_name(day: str, part: int = 1) -> str:
    return f"{day}.jsonl" if part == 1 else f"{day}.{part}.jsonl"


def parse_name(name: str) -> tuple[str, int] | None:
    match = NAME_RE.match(name)
    if not match:
        return None
    return match.group(1), int(match.group(2) or 1)


def list_files(folder: Path, since_day: str | None = None) -> list[ArchiveFile]:
    """Final archive files in `folder` (no .tmp), ordered by (day, part)."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        parsed = parse_name(path.name)
        if parsed and (since_day is None or parsed[0] >= since_day):
            found.append(ArchiveFile(parsed[0], parsed[1], path))
    return sorted(found)


def _default(value: Any) -> Any:
    # BLOB columns: JSON has no bytes, so they are tagged base64
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$base64": base64.b64encode(bytes(value)).decode()}
    return str(value)


def encode(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_tmp(path: Path, blocks: Iterable[bytes], *, sync: bool = True) -> tuple[int, int]:
    """Write `path.tmp` durably (file and directory entry fsynced). Returns (lines, bytes).

    Each block is one or more whole lines, each ending in a newline (a JSON line never holds a raw one).
    `sync=False` leaves the fsyncs to a later sync_tmp() over several files, so the kernel writes one
    file back while the next is produced.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    count = size = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # archived rows are as private as the databases they came from
    with os.fdopen(fd, "wb", buffering=1 << 20) as out:
        for block in blocks:
            out.write(block)
            count += block.count(b"\n")
            size += len(block)
        out.flush()
        if sync:
            os.fsync(out.fileno())
    if sync:
        fsync_dir(path.parent)
    return count, size


def sync_tmp(paths: Iterable[Path]) -> None:
    """Make the `.tmp` files of `paths` (written with sync=False) and their directory entries durable."""
    folders = set()
    for path in paths:
        fd = os.open(path.with_name(path.name + TMP_SUFFIX), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        folders.add(path.parent)
    for folder in folders:
        fsync_dir(folder)


def publish(path: Path, *, sync: bool = True) -> None:
    """Rename `path.tmp` to `path` and make the rename durable (`sync=False`: the caller fsyncs the folder)."""
    os.replace(path.with_name(path.name + TMP_SUFFIX), path)
    if sync:
        fsync_dir(path.parent)


def is_truncated(path: Path) -> bool:
    """True when a non-empty file does not end with a newline (a cut-off last line)."""
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1) != b"\n"


def iter_lines(path: Path, problems: list[str] | None = None) -> Iterator[Any]:
    """Parsed lines of a JSONL file, streamed; a line that does not parse is skipped and reported."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                if problems is not None:
                    problems.append(f"{path}: line {number} is not valid JSON (truncated file?); skipped")
