"""Which stored blobs something still refers to: the marking half of `nerve gc`'s blob collection.

A row refers to a blob by its sha256 hex digest (what `db.blobs.put` returns),
written anywhere in a value: a column of its own, inside a JSON document, after
a `sha256:` prefix. So a blob is referred to while its digest appears, as a
whole word of hex, in:

- any value of any table of any sense database in `data/senses/` (its
  `_signals` included), or a BLOB value that is the raw 32-byte digest;
- a payload of `data/logs.db` (workflow messages, run results) or of
  `data/events.db` (external events);
- any line of an archived day under `data/archive/`.

This errs towards keeping: a digest that only looks like a reference keeps its
blob. And it refuses to guess: a database it cannot read stops the marking
(`Unreadable`), and the caller removes no blob at all.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nerve_cli.home import Layout
from nerve_cli.store.sqlitefile import open_reader

# a digest standing alone: not part of a longer run of hex digits
_DIGEST = re.compile(rb"(?<![0-9a-fA-F])[0-9a-fA-F]{64}(?![0-9a-fA-F])")
_BLOB_NAME = re.compile(r"^[0-9a-f]{62}\Z")


class Unreadable(Exception):
    """A file that may refer to blobs could not be read; no blob can safely be called unreferenced."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class StoredBlob:
    sha: str
    path: Path
    bytes: int
    mtime: float  # its last write, or its last `put` of the same bytes


def stored(root: Path) -> list[StoredBlob]:
    """Every blob under `root` (data/blobs), by digest."""
    out = []
    for shard in sorted(root.iterdir()) if root.is_dir() else []:
        if not (shard.is_dir() and len(shard.name) == 2):
            continue
        for path in sorted(shard.iterdir()):
            if _BLOB_NAME.match(path.name) and path.is_file():
                st = path.stat()
                out.append(StoredBlob(shard.name + path.name, path, st.st_size, st.st_mtime))
    return out


def leftovers(root: Path) -> list[Path]:
    """Temporary files a write interrupted by a crash left behind (`.tmp-*` beside the blobs)."""
    return sorted(p for p in root.glob("??/.tmp-*") if p.is_file()) if root.is_dir() else []


def referenced(data: Path, wanted: set[str], skip: Iterable[Path] = ()) -> set[str]:
    """Which of `wanted` (digests) something under `data` refers to; files under `skip` are not read.

    Stops reading as soon as every wanted digest is found. Raises `Unreadable`.
    """
    left = set(wanted)
    found: set[str] = set()
    skipped = [Path(p) for p in skip]
    for path in _places(data):
        if not left:
            break
        if any(path == s or s in path.parents for s in skipped):
            continue
        for digest in (_in_database(path) if path.suffix == ".db" else _in_file(path)):
            if digest in left:
                left.discard(digest)
                found.add(digest)
    return found


def _places(data: Path) -> Iterator[Path]:
    layout = Layout(data.parent)
    for path in (layout.logs_db, layout.events_db):
        if path.is_file():
            yield path
    senses = layout.sense_data
    if senses.is_dir():
        yield from sorted(senses.glob("*.db"))
    archive = data / "archive"
    if archive.is_dir():
        yield from sorted(p for p in archive.rglob("*") if p.is_file())


def _digests(value: object) -> Iterator[str]:
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        if len(value) == 32:
            yield value.hex()  # a raw digest kept in a BLOB column
        for match in _DIGEST.finditer(value):
            yield match.group().decode().lower()


def _in_file(path: Path) -> Iterator[str]:
    try:
        with open(path, "rb") as fh:
            for line in fh:
                for match in _DIGEST.finditer(line):
                    yield match.group().decode().lower()
    except OSError as exc:
        raise Unreadable(path, exc.strerror or str(exc)) from None


def _in_database(path: Path) -> Iterator[str]:
    try:
        conn = open_reader(path)
    except Exception as exc:  # damaged, unreadable, not a database
        raise Unreadable(path, str(exc)) from None
    try:
        for table in _tables(conn):
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})")]
            if not columns:
                continue
            picked = ", ".join(_quote(c) for c in columns)
            for row in conn.execute(f"SELECT {picked} FROM {_quote(table)}"):
                for value in row:
                    yield from _digests(value)
    except sqlite3.Error as exc:
        raise Unreadable(path, str(exc)) from None
    finally:
        conn.close()


def _tables(conn: sqlite3.Connection) -> list[str]:
    """Ordinary tables; a virtual table's content lives in its shadow tables, which are read instead."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name != 'sqlite_sequence'")
    return [name for name, sql in rows if not (sql or "").upper().startswith("CREATE VIRTUAL")]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
