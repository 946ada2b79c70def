"""Load the senses of one group into a worker: import, open, migrate, wire peers.

A sense that fails to load (syntax error, import error, no `compute`, bad
migration) is reported with the user's file and line and skipped; the other
senses of the group still load.
"""

from __future__ import annotations

import inspect
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.schema.declare import tables_of
from nerve_cli.schema.load import import_sense_module
from nerve_cli.schema.migrate import apply_migrations
from nerve_cli.store.blobs import BlobStore
from nerve_cli.store.sensedb import Peers, SenseDB, damage_fix, write_archive_map
from nerve_cli.store.sqlitefile import damaged, is_damage
from nerve_cli.wire.protocol import ErrorInfo
from nerve_cli.wire.spec import GroupSpec
from nerve_cli.worker.compute import LoadedSense, compute_arity
from nerve_cli.worker.failure import error_info, shown_path


@dataclass
class LoadResult:
    senses: dict[str, LoadedSense] = field(default_factory=dict)
    failed: dict[str, ErrorInfo] = field(default_factory=dict)


def load_senses(home: Path, spec: GroupSpec) -> LoadResult:
    layout = Layout(home)
    blobs = BlobStore(layout.blobs)
    result = LoadResult()
    for name, peers in spec.senses.items():
        try:
            result.senses[name] = load_sense(layout, name, peers, blobs)
        except _LoadFailed as exc:
            result.failed[name] = exc.info
        except (OSError, sqlite3.Error) as exc:  # this sense's files or folder (a loop, no permission): its load fails
            result.failed[name] = error_info(exc, layout.sense_dir(name), layout.home)
    return result


class _LoadFailed(Exception):
    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.summary())
        self.info = info


def load_sense(layout: Layout, name: str, peer_names: tuple[str, ...], blobs: BlobStore) -> LoadedSense:
    folder = layout.sense_dir(name)
    code = folder / "sense.py"
    if not code.is_file():
        raise _LoadFailed(ErrorInfo(
            "SenseError", f"{shown_path(str(code), layout.home)} does not exist; create it with "
            f"`nerve sense new {name}` or remove senses.{name} from nerve.yaml"))
    schema, sense = _import(folder, name, layout.home)
    compute = getattr(sense, "compute", None)
    if not callable(compute):
        raise _LoadFailed(ErrorInfo(
            "SenseError", "sense.py defines no `compute(db, peers)` function",
            file=shown_path(str(code), layout.home), line=1))
    db = _open_db(layout, name, folder, schema, blobs)
    peers = Peers(name, peer_names, layout.sense_db, blobs)
    return LoadedSense(
        name=name, folder=folder, home=layout.home, db=db, peers=peers, compute=compute,
        is_async=inspect.iscoroutinefunction(compute), nargs=compute_arity(compute),
    )


def _import(folder: Path, name: str, home: Path) -> tuple[object | None, object]:
    try:
        schema = import_sense_module(folder, name, "schema", fresh=True) if (folder / "schema.py").is_file() else None
        sense = import_sense_module(folder, name, "sense", fresh=True)
    except BaseException as exc:  # SyntaxError, ImportError, anything the module's top level raises
        raise _LoadFailed(error_info(exc, folder, home)) from exc
    return schema, sense


def _open_db(layout: Layout, name: str, folder: Path, schema: object | None, blobs: BlobStore) -> SenseDB:
    path = layout.sense_db(name)
    try:
        db = SenseDB.open(path, name=name, blobs=blobs)
    except NerveError as exc:  # damaged (not a database, 0 bytes), or data/ not writable
        raise _LoadFailed(ErrorInfo(type(exc).__name__, str(exc))) from exc
    try:
        apply_migrations(db.conn, layout.migrations(name))
        write_archive_map(db.conn, tables_of(schema) if schema is not None else [])  # type: ignore[arg-type]
    except BaseException as exc:
        db.close()
        if is_damage(exc):  # a header that reads, pages that do not
            raise _LoadFailed(ErrorInfo("DamagedDatabase", str(damaged(path, str(exc), damage_fix(path))))) from exc
        raise _LoadFailed(error_info(exc, folder, layout.home)) from exc
    return db
