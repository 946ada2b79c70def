"""`nerve sense rename OLD NEW`: folder, database, archive, every nerve.yaml reference, one commit.

nerve.yaml follows by key (`senses.OLD` keeps its place and comments), peers
lists, reflexes' `sense:` and `on:`, and cascade markers. So do the cursors of
OLD's listeners (each listener's `_nerve_cursors` row for OLD is renamed, before
nerve.yaml names NEW), so a listener goes on from the event it had reached
instead of receiving OLD's whole history again as NEW's. Other senses' code
that names OLD (`peers["OLD"]`) cannot be rewritten safely; it is listed.

With an engine running, the rename is coordinated through hot reload rather
than done under a live worker: nerve.yaml is first written with OLD disabled;
once the engine has let go of it (its worker restarted without it), the files
move and the renamed nerve.yaml is written, and the engine picks NEW up as a
new sense. If the engine does not let go (it runs with --no-watch), nerve.yaml
is put back and the rename is refused. The intermediate state is never
committed.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.config.edit import edit_config, rename_sense_refs, write_atomic
from nerve_cli.config.lifecycle import check_sense, load_for_edit
from nerve_cli.config.lifecycle_marks import disable
from nerve_cli.config.load import read_config
from nerve_cli.config.model import BUILTIN_SENSES, check_name
from nerve_cli.errors import NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.instance.change import Change
from nerve_cli.ops.client import engine_running, request
from nerve_cli.store.sqlitefile import BUSY_TIMEOUT_MS, immediate

RELEASE_TIMEOUT = 20.0  # how long a running engine gets to stop the old sense


@dataclass
class Renamed:
    old: str
    new: str
    moved: list[str] = field(default_factory=list)  # what moved on disk, e.g. `senses/a/ → senses/b/`
    cursors: list[str] = field(default_factory=list)  # listeners whose cursor on OLD now says NEW
    config: list[str] = field(default_factory=list)  # what changed in nerve.yaml
    mentions: list[str] = field(default_factory=list)  # `senses/x/sense.py:12` lines naming OLD in code
    engine: bool = False  # coordinated with a running engine
    sha: str | None = None
    notes: list[str] = field(default_factory=list)


def rename_sense(home: Path, old: str, new: str) -> Renamed:
    layout = Layout(home)
    text, config, _ = load_for_edit(home)
    check_sense(config, old)
    try:
        check_name(new)
    except ValueError as exc:
        raise SenseError(f"invalid sense name: {exc}") from None
    _check_free(layout, config, old, new)
    result = Renamed(old, new)
    change = Change(home, f"sense rename {old} {new}", [layout.config, layout.sense_dir(old), layout.sense_dir(new)])
    change.protect()
    result.notes = change.notes()
    if config.senses[old].enabled and engine_running(home):
        result.engine = True
        _release(home, text, old)
    try:
        result.moved = _move(layout, old, new)
    except BaseException:
        _write(layout, text)  # the engine takes OLD back
        raise
    result.cursors = _rename_cursors(layout, old, new)  # before nerve.yaml names NEW: no listener reads it from 0
    try:
        result.config = _rewrite(home, text, old, new)
    except BaseException:
        _rename_cursors(layout, new, old)
        raise
    result.mentions = _mentions(layout, old)
    result.sha = change.commit()
    return result


def _check_free(layout: Layout, config, old: str, new: str) -> None:
    if new == old:
        raise SenseError(f"`{old}` already has that name")
    if new in BUILTIN_SENSES or new in config.senses:
        raise SenseError(f"there already is a sense `{new}` in nerve.yaml; pick another name")
    if new in config.workflows:
        raise SenseError(f"`{new}` is a workflow's name; pick another name")
    if not layout.sense_dir(old).is_dir():
        raise SenseError(f"senses/{old}/ does not exist, so there is nothing to rename")
    for path in (layout.sense_dir(new), layout.sense_db(new), layout.sense_archive(new)):
        if path.exists():
            raise SenseError(f"{path.relative_to(layout.home)} already exists (left by an earlier sense?); "
                             f"remove it (`nerve gc` clears old data) or pick another name")


def _release(home: Path, text: str, old: str) -> None:
    """Disable OLD in nerve.yaml and wait until the running engine no longer runs it."""
    with edit_config(home) as doc:
        disable(doc["senses"], old, None)
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while time.monotonic() < deadline:
        status = request(home, "status", timeout=5.0)
        held = old in status["senses"] or any(old in w.get("senses", []) for w in status["workers"])
        if not held:
            return
        time.sleep(0.05)
    _write(Layout(home), text)
    raise NerveError(f"the running engine did not let go of `{old}` within {RELEASE_TIMEOUT:g}s (is it running "
                     "with --no-watch?); nerve.yaml is back as it was: stop the engine and run the rename again")


def _move(layout: Layout, old: str, new: str) -> list[str]:
    moves = [(layout.sense_dir(old), layout.sense_dir(new))]
    db = layout.sense_db(old)
    for suffix in ("", "-wal", "-shm"):
        moves.append((db.with_name(db.name + suffix), layout.sense_db(new).with_name(f"{new}.db{suffix}")))
    moves.append((layout.sense_archive(old), layout.sense_archive(new)))
    done: list[tuple[Path, Path]] = []
    try:
        for src, dst in moves:
            if src.exists():
                os.rename(src, dst)
                done.append((src, dst))
    except BaseException:
        for src, dst in reversed(done):  # all or nothing
            os.rename(dst, src)
        raise
    return [f"{s.relative_to(layout.home)} → {d.relative_to(layout.home)}" for s, d in done]


def _rename_cursors(layout: Layout, old: str, new: str) -> list[str]:
    """In every sense database, the cursor on source `old` becomes the cursor on `new`; the listeners changed.

    Each database is written in its own transaction, waiting for a compute in progress there to commit (the
    cursor moves only in computes). A stale row for `new` (a sense of that name deleted long ago) goes first.
    """
    changed = []
    for path in sorted(layout.sense_data.glob("*.db")) if layout.sense_data.is_dir() else []:
        if not path.is_file() or path.stat().st_size == 0:
            continue  # nothing to carry over (a damaged one is refused by its own sense)
        try:
            conn = sqlite3.connect(path, isolation_level=None)
        except sqlite3.Error:
            continue
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            with immediate(conn):
                if conn.execute("SELECT 1 FROM _nerve_cursors WHERE source = ?", (old,)).fetchone() is None:
                    continue
                conn.execute("DELETE FROM _nerve_cursors WHERE source = ?", (new,))
                conn.execute("UPDATE _nerve_cursors SET source = ? WHERE source = ?", (new, old))
            changed.append(path.stem)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise SenseError(f"cannot carry the cursor on `{old}` over in {path}: {exc}; nothing was renamed "
                                 "there (run the rename again, or `nerve sense replay` that listener)") from None
        finally:
            conn.close()
    return changed


def _rewrite(home: Path, text: str, old: str, new: str) -> list[str]:
    """nerve.yaml as it was before the rename began (`text`), every reference renamed, written once."""
    with edit_config(home, base=text) as doc:
        changed = rename_sense_refs(doc, old, new)
    return changed


def _write(layout: Layout, text: str) -> None:
    if read_config(layout.config) != text:
        write_atomic(layout.config, text)


def _mentions(layout: Layout, old: str) -> list[str]:
    """Lines of other senses' and workflows' code that name OLD as a string (peers["OLD"], a directive)."""
    pattern = re.compile(r"""["']""" + re.escape(old) + r"""["']""")
    out = []
    for path in sorted([*layout.senses.glob("*/*.py"), *layout.workflows.glob("*.py")]):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        out += [f"{path.relative_to(layout.home)}:{i}" for i, line in enumerate(lines, 1) if pattern.search(line)]
    return out
