"""Load the senses of one group into a worker: import, open, migrate, wire peers.

A sense that fails to load (syntax error, import error, no `compute` or one
with an unusable signature, a schema.py its migrations disagree with, a bad
migration) is reported with the user's file and line and skipped; the other
senses of the group still load. `nerve config check` runs the same checks
(`worker.check`) without starting an engine.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.schema.declare import TableSpec, tables_of
from nerve_cli.schema.drift import SchemaDrift, check_drift
from nerve_cli.schema.load import import_sense_module
from nerve_cli.schema.migrate import apply_migrations
from nerve_cli.store import dbwatch
from nerve_cli.store.blobs import BlobStore
from nerve_cli.store.sensedb import Peers, SenseDB, damage_fix, write_archive_map
from nerve_cli.store.sqlitefile import damaged, integrity_problem, is_damage
from nerve_cli.wire.protocol import ErrorInfo
from nerve_cli.wire.spec import GroupSpec
from nerve_cli.worker.compute import LoadedSense, compute_arity, file_id, signature_problem
from nerve_cli.worker.events import EventReader
from nerve_cli.worker.evidence import acting_for
from nerve_cli.worker.failure import error_info, shown_path
from nerve_cli.worker.rehearsal import RehearsalBlobs
from nerve_cli.worker.rehearsal import open_db as open_rehearsal_db


@dataclass
class LoadResult:
    senses: dict[str, LoadedSense] = field(default_factory=dict)
    failed: dict[str, ErrorInfo] = field(default_factory=dict)


def load_senses(home: Path, spec: GroupSpec, *, dry_run: bool = False) -> LoadResult:
    """`dry_run`: for a worker that only rehearses computes: databases opened without writing, blobs kept
    in memory (`worker.rehearsal`)."""
    layout = Layout(home)
    blobs = RehearsalBlobs(layout.blobs) if dry_run else BlobStore(layout.blobs)
    result = LoadResult()
    for name, peers in spec.senses.items():
        try:
            loaded = load_sense(layout, name, peers, blobs, spec.lazy, dry_run=dry_run)
            version, hashed = spec.signals.get(name, (None, False))
            result.senses[name] = replace(loaded, signal_version=version, signal_hash=hashed)
        except _LoadFailed as exc:
            result.failed[name] = exc.info
        except (OSError, sqlite3.Error) as exc:  # this sense's files or folder (a loop, no permission): its load fails
            result.failed[name] = error_info(exc, layout.sense_dir(name), layout.home)
    return result


def _watch(db_path: Path | None) -> dbwatch.WatchReader | None:
    watch = dbwatch.attached()
    return watch if watch is not None and db_path is not None and watch.covers(str(db_path)) else None


class _LoadFailed(Exception):
    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.summary())
        self.info = info


def load_sense(layout: Layout, name: str, peer_names: tuple[str, ...], blobs: BlobStore,
               lazy: dict[str, tuple[str, ...]] | None = None, *, dry_run: bool = False) -> LoadedSense:
    folder = layout.sense_dir(name)
    code = folder / "sense.py"
    if not code.is_file():
        raise _LoadFailed(ErrorInfo(
            "SenseError", f"{shown_path(str(code), layout.home)} does not exist; create it with "
            f"`nerve sense new {name}` or remove senses.{name} from nerve.yaml"))
    with acting_for(name):  # a thread its import starts is this sense's (worker.evidence)
        schema, sense = _import(folder, name, layout.home)
    compute = getattr(sense, "compute", None)
    problem = compute_problem(compute, code, layout.home)
    if problem is not None:
        raise _LoadFailed(problem)
    assert compute is not None  # compute_problem refuses a missing compute
    specs = schema_specs(schema, folder, name, layout.home)
    created = not dry_run and not layout.sense_db(name).exists()
    copy = False
    if dry_run:
        db, copy = _open_rehearsal(layout, name, folder, blobs)
    else:
        db = _open_db(layout, name, folder, specs, blobs)
    peers = Peers(name, peer_names, layout.sense_db, blobs, lazy=lazy)
    nargs = compute_arity(compute)
    return LoadedSense(
        name=name, folder=folder, home=layout.home, db=db, peers=peers, compute=compute,
        is_async=inspect.iscoroutinefunction(compute), nargs=nargs,
        events=EventReader(layout.data, name) if nargs >= 3 else None, rehearsal_copy=copy,
        rehearsal_blobs=blobs.held if isinstance(blobs, RehearsalBlobs) else None,
        # a rehearsal never rebuilds a database: it keeps nothing
        db_file=None if dry_run else file_id(db.path), created=created, watch=None if dry_run else _watch(db.path),
        reopen=None if dry_run else (lambda: _reopen(layout, name, folder, specs, blobs)),
    )


def _reopen(layout: Layout, name: str, folder: Path, specs: list[TableSpec], blobs: BlobStore) -> SenseDB:
    """The database opened again (built from the migrations when missing); a failure is the compute's error."""
    try:
        return _open_db(layout, name, folder, specs, blobs)
    except _LoadFailed as exc:
        raise NerveError(exc.info.message) from None


def check_sense(layout: Layout, name: str) -> ErrorInfo | None:
    """Everything `load_sense` checks before it opens the database: import, `compute`, drift. None when fine."""
    folder = layout.sense_dir(name)
    code = folder / "sense.py"
    try:
        if not code.is_file():
            return ErrorInfo("SenseError", f"{shown_path(str(code), layout.home)} does not exist")
        schema, sense = _import(folder, name, layout.home)
        problem = compute_problem(getattr(sense, "compute", None), code, layout.home)
        if problem is not None:
            return problem
        schema_specs(schema, folder, name, layout.home)
    except _LoadFailed as exc:
        return exc.info
    return None


def _import(folder: Path, name: str, home: Path) -> tuple[object | None, object]:
    try:
        schema = import_sense_module(folder, name, "schema", fresh=True) if (folder / "schema.py").is_file() else None
        sense = import_sense_module(folder, name, "sense", fresh=True)
    except BaseException as exc:  # SyntaxError, ImportError, anything the module's top level raises
        raise _LoadFailed(error_info(exc, folder, home)) from exc
    return schema, sense


def compute_problem(compute: object, code: Path, home: Path) -> ErrorInfo | None:
    """ErrorInfo (at the `def` line) when `compute` is missing or cannot be called as compute(db, peers[, trigger])."""
    if not callable(compute):
        return ErrorInfo("SenseError", "sense.py defines no `compute(db, peers)` function",
                         file=shown_path(str(code), home), line=1)
    why = signature_problem(compute)
    if why is None:
        return None
    where = getattr(compute, "__code__", None)
    return ErrorInfo("SenseError", why, file=shown_path(where.co_filename if where else str(code), home),
                     line=where.co_firstlineno if where else 1)


def schema_specs(schema: object | None, folder: Path, name: str, home: Path) -> list[TableSpec]:
    """The tables schema.py declares, refused (with the command that fixes it) when its migrations disagree."""
    if schema is None:
        return []
    try:
        specs = tables_of(schema)  # type: ignore[arg-type]
        check_drift(name, specs, folder / "migrations")
    except SchemaDrift as exc:
        raise _LoadFailed(ErrorInfo("SchemaDrift", str(exc), file=shown_path(str(folder / "schema.py"), home),
                                    line=_class_line(folder / "schema.py", specs, exc.problems))) from exc
    except BaseException as exc:
        raise _LoadFailed(error_info(exc, folder, home)) from exc
    return specs


def _class_line(path: Path, specs: list[TableSpec], problems: list[str]) -> int | None:
    """Where to look in schema.py (best effort): the field a problem names, else its table's class."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for spec in specs:
        mine = [p for p in problems if p.startswith((f"table {spec.name} ", f"table {spec.name}:", f"column {spec.name}."))]
        if not mine:
            continue
        start = next((i for i, text in enumerate(lines) if text.lstrip().startswith(f"class {spec.cls.__name__}")), None)
        if start is None:
            return None
        column = mine[0].split(" ")[1].partition(".")[2] if mine[0].startswith("column ") else ""
        field = re.compile(rf"^\s+{re.escape(column)}\s*:") if column else None
        found = next((i for i in range(start + 1, len(lines)) if field and field.match(lines[i])), start)
        return found + 1
    return None


def _open_rehearsal(layout: Layout, name: str, folder: Path, blobs: BlobStore) -> tuple[SenseDB, bool]:
    try:
        return open_rehearsal_db(layout.sense_db(name), layout.migrations(name), name, blobs)
    except NerveError as exc:
        raise _LoadFailed(ErrorInfo(type(exc).__name__, str(exc))) from exc
    except BaseException as exc:
        raise _LoadFailed(error_info(exc, folder, layout.home)) from exc


def _open_db(layout: Layout, name: str, folder: Path, specs: list[TableSpec], blobs: BlobStore) -> SenseDB:
    path = layout.sense_db(name)
    try:
        db = SenseDB.open(path, name=name, blobs=blobs)
    except NerveError as exc:  # damaged (not a database, 0 bytes), or data/ not writable
        raise _LoadFailed(ErrorInfo(type(exc).__name__, str(exc))) from exc
    try:
        apply_migrations(db.conn, layout.migrations(name))
        write_archive_map(db.conn, specs)
    except BaseException as exc:
        problem = None if isinstance(exc, NerveError) else integrity_problem(db.conn)
        db.close()
        if is_damage(exc):  # a header that reads, pages that do not
            raise _LoadFailed(ErrorInfo("DamagedDatabase", str(damaged(path, str(exc), damage_fix(path))))) from exc
        if problem is not None:  # Nerve's own code failed on what it read: the file, not the code, is wrong
            why = f"{problem}; reading it failed with {type(exc).__name__}: {exc}"
            raise _LoadFailed(ErrorInfo("DamagedDatabase", str(damaged(path, why, damage_fix(path))))) from exc
        raise _LoadFailed(error_info(exc, folder, layout.home)) from exc
    return db


