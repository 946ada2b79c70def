"""`nerve backup DEST`: a consistent copy of the whole instance, safe while the engine runs.

The databases are in WAL mode: recent commits may live only in `*.db-wal`
(a reader attached at a clean stop even keeps it there), so copying a `.db`
file alone can lose rows. Each database is copied with `VACUUM INTO`, which
writes one self-contained file from a consistent snapshot (no WAL needed to
read it); every other file (config, code, git history, archived days, blobs)
is copied as it is. WAL/SHM files, the socket and the lock are left out.
The copy of `data/` is as private as the instance's own: folders 0700, files
0600 (or stricter, as blobs' 0400), each database created 0600 before it is
written.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.errors import NerveError

SKIP_SUFFIXES = ("-wal", "-shm", "-journal")
SKIP_NAMES = {"nerve.sock", "nerve.lock", "__pycache__"}
PRIVATE = "data"  # the top-level folder whose copy only its owner may read, as data/ itself


@dataclass
class BackupReport:
    dest: Path
    databases: list[dict] = field(default_factory=list)   # {"path", "bytes"}
    files: int = 0
    bytes: int = 0


def backup(home: Path, dest: Path) -> BackupReport:
    """Copy instance `home` to `dest` (which must not exist, or be an empty folder)."""
    home, dest = Path(home).resolve(), Path(dest).resolve()
    if dest == home or home in dest.parents:
        raise NerveError(f"{dest} is inside the instance {home}: choose a destination outside it")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise NerveError(f"{dest} already exists and is not an empty folder: choose a new path "
                         "(backup never overwrites)")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NerveError(f"cannot back up to {dest}: its folder cannot be made ({exc.strerror}: {exc.filename})") from None
    staging = dest.with_name(f".{dest.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    report = BackupReport(dest)
    try:
        _copy_tree(home, staging, staging, report, private=False)
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)  # nothing half-written under the name asked for
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


def _copy_tree(src: Path, dst: Path, root: Path, report: BackupReport, private: bool) -> None:
    if private:
        dst.mkdir(mode=0o700)
        os.chmod(dst, 0o700)  # whatever the umask
    else:
        dst.mkdir(parents=True)
    for entry in sorted(src.iterdir()):
        if entry.name in SKIP_NAMES or entry.name.endswith(SKIP_SUFFIXES) or entry.is_socket():
            continue
        target = dst / entry.name
        inside = private or (dst == root and entry.name == PRIVATE)
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            _copy_tree(entry, target, root, report, inside)
        elif not entry.is_file():  # a FIFO or a device: reading it would wait for ever or never end
            if entry.suffix == ".db":
                raise NerveError(f"{entry} is not a database file (a FIFO or a device is where it belongs): move it "
                                 "aside or restore it; nothing was backed up")
            continue  # it holds no data to copy, as a socket holds none
        elif entry.suffix == ".db" and _is_sqlite(entry):
            copy_database(entry, target, private=inside)
            size = target.stat().st_size
            report.databases.append({"path": str(target.relative_to(root)), "bytes": size})
            report.bytes += size
        else:
            shutil.copy2(entry, target)
            if inside:  # 0644 becomes 0600; a stricter mode (a blob's 0400) stays
                os.chmod(target, stat.S_IMODE(entry.stat().st_mode) & 0o700)
            report.files += 1
            report.bytes += target.stat().st_size


def copy_database(src: Path, dst: Path, *, private: bool = True) -> None:
    """A consistent, self-contained copy of a live WAL database (readable with `immutable=1`, no -wal file).

    `private`: the copy is created 0600 before anything is written to it (VACUUM INTO fills an empty file).
    """
    if private:
        os.close(os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(src.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("VACUUM INTO ?", (str(dst),))
    except sqlite3.Error as exc:
        raise NerveError(f"could not copy {src}: {exc}") from exc
    finally:
        conn.close()


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"
