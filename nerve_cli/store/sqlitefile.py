"""The SQLite files under data/: created whole and private, refused clearly when damaged.

- A new database is built as a temporary file (mode 0600, header and WAL mode
  written) and linked into place, so a database at its path always has its
  header. A 0-byte file can then only be a truncated one: it is refused like
  any damaged database, never silently started over (a sense's rows gone
  without a word).
- data/ and the folders Nerve makes under it are 0700, the databases 0600;
  SQLite gives the -wal and -shm files the mode of their database.
- A damaged file (not a database, malformed, empty, a folder where the file
  belongs) raises `DamagedDatabase` naming the file and what to do; a
  filesystem that refuses writes raises `StorageError` naming the file and the
  reason. A reader's connection names its file too when damage shows only
  later, at a query that reaches a bad page: the error is `DamagedRead`, a
  `DamagedDatabase` that is also an `sqlite3.DatabaseError`, so code that
  skips an unreadable database still does, and the CLI says which file.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from nerve_cli.errors import ErrorType, NerveError

BUSY_TIMEOUT_MS = 5000
_DAMAGE_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


class DamagedDatabase(NerveError):
    """A database file that SQLite cannot read as a database."""

    type = ErrorType.DAMAGED_DATABASE


class StorageError(NerveError):
    """data/ cannot be written (read-only filesystem, permissions, disk full)."""

    type = ErrorType.STORAGE_ERROR


class ReadOnlyDatabase(StorageError, sqlite3.OperationalError):
    """A write SQLite refused because the database or its folder takes none (read-only media, permissions):
    a StorageError for the CLI's one line, an OperationalError for code that retries writes."""

    type = ErrorType.STORAGE_ERROR


def read_only(path: Path) -> ReadOnlyDatabase:
    return ReadOnlyDatabase(f"cannot write {path}: the database is read-only (is the filesystem mounted "
                            "read-only, or the folder not yours to write?); make data/ writable")


def is_read_only(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_READONLY or "readonly" in str(exc)


def private_dir(path: Path) -> Path:
    """Create `path` and any missing parents as 0700; tighten `path` itself if others may enter it (OSError if not)."""
    path = Path(path)
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def storage_error(path: Path, exc: OSError) -> StorageError:
    """An OSError while writing under data/, as one line with the file and what to do."""
    why = exc.strerror or str(exc)
    if exc.errno in _READ_ONLY:
        fix = "make that folder writable (is the filesystem mounted read-only?)"
    elif exc.errno == errno.ENOSPC:
        fix = "free some space on that disk"
    else:
        fix = "check that folder"
    return StorageError(f"cannot write {exc.filename or path}: {why}; {fix}")


def _unwritable(folder: Path) -> OSError:
    """Why SQLite could not open a file for writing in `folder`, as the OSError the OS would give."""
    code = errno.EROFS if os.statvfs(folder).f_flag & os.ST_RDONLY else errno.EACCES
    return OSError(code, os.strerror(code), str(folder))


class DamagedRead(DamagedDatabase, sqlite3.DatabaseError):
    """Damage met by a query on a reader's connection, with the file it is in."""

    type = ErrorType.DAMAGED_DATABASE


READ_FIX = "restore it from a backup, or move it aside; `nerve doctor` checks every database"


def is_damage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _DAMAGE_CODES


def _not_a_file(path: Path, fix: str) -> DamagedDatabase | None:
    """A folder, a FIFO or a device, or an empty file, where a database (or its -wal and -shm) belongs: SQLite
    would say "disk I/O error", read no tables, or wait for ever on a FIFO's other end."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = os.stat(file).st_mode
        except OSError:
            continue
        where = "" if file == path else f" (its {file.name[len(path.name):]} file)"
        if stat.S_ISDIR(mode):
            return damaged(path, f"it is a folder, not a database file{where}", fix)
        if not stat.S_ISREG(mode):
            return damaged(path, f"it is a {_kind(mode)}, not a database file{where}", fix)
    try:
        if path.is_file() and path.stat().st_size == 0:
            return damaged(path, "it is empty (0 bytes): it was truncated", fix)
    except OSError:
        return None
    return None


def _kind(mode: int) -> str:
    return ("FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode)
            else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special file")


def check_file(path: Path, fix: str = "") -> None:
    """Raise DamagedDatabase when something that is not a database file sits where one belongs (for the few
    places that open a database without `open_reader`/`open_writer`)."""
    problem = _not_a_file(Path(path), fix or READ_FIX)
    if problem is not None:
        raise problem


def header_problem(path: Path) -> DamagedDatabase | None:
    """What a look at the file alone shows (a folder, 0 bytes, no SQLite header), without opening it: cheap enough
    for a view that names damage in files it does not read (damage inside the pages takes a query to see)."""
    found = _not_a_file(path, READ_FIX)
    if found is not None or not path.is_file():
        return found
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        return damaged(path, f"it cannot be read: {exc.strerror}", READ_FIX)
    return None if head == b"SQLite format 3\x00" else damaged(path, "it is not a database file", READ_FIX)


def integrity_problem(conn: sqlite3.Connection) -> str | None:
    """SQLite's first complaint about the file (`PRAGMA quick_check`), or None when it finds none."""
    try:
        found = conn.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    if found and found[0] == "ok":
        return None
    return "quick_check: " + (" ".join(str(found[0]).replace("*** in database main ***", "").split()) if found
                              else "no answer")


def database_problem(path: Path) -> str | None:
    """What is wrong with the database file at `path` (not a file, empty, no header, pages that do not read),
    found read-only; None when it is sound."""
    path = Path(path)
    found = header_problem(path)
    if found is not None:
        return str(found)
    try:
        conn = open_reader(path)
    except (sqlite3.DatabaseError, DamagedDatabase) as exc:
        return str(exc) if isinstance(exc, DamagedDatabase) else str(damaged(path, str(exc), READ_FIX))
    try:
        problem = integrity_problem(conn)
    finally:
        conn.close()
    return None if problem is None else str(damaged(path, problem, READ_FIX))


def damaged(path: Path, why: str, fix: str) -> DamagedDatabase:
    return DamagedDatabase(f"{path} is damaged ({why}): {fix}")


def open_writer(path: Path, *, fix: str) -> sqlite3.Connection:
    """The read-write connection to a database under data/ (autocommit at the driver, WAL, NORMAL).

    `fix` tells the user what to do if the file turns out to be damaged.
    """
    path = Path(path)
    problem = _not_a_file(path, fix)
    if problem is not None:
        raise problem
    try:
        private_dir(path.parent)
        _create(path)
        _tighten(path)
        if path.stat().st_size == 0:
            raise damaged(path, "it is empty (0 bytes): it was truncated", fix)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(path, str(exc), fix) from None
        if isinstance(exc, sqlite3.OperationalError) and not os.access(path.parent, os.W_OK):
            raise storage_error(path, _unwritable(path.parent)) from None
        raise
    except OSError as exc:
        raise storage_error(path, exc) from None
    return conn


def open_reader(path: Path, *, fix: str = READ_FIX, **connect: object) -> sqlite3.Connection:
    """A read-only connection that sees a live writer's commits (WAL); on read-only media, the file as it is.

    Reading a WAL database needs its -shm file, which SQLite cannot create on a
    read-only filesystem (`nerve logs` failed there with "unable to open database
    file"). When the folder takes no writes and no -wal file holds commits, the
    database file is all there is, so it is opened `immutable`. Damage, now or at
    a later query, is `DamagedDatabase` naming the file and `fix`.
    """
    path = Path(path)
    problem = _not_a_file(path, fix)
    if problem is not None:
        raise problem
    uri = path.resolve().as_uri()
    conn = _connect(uri + "?mode=ro", path, fix, connect)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # open the file now, not at the first query
        return conn
    except sqlite3.OperationalError:
        conn.close()
        wal = path.with_name(path.name + "-wal")
        if not path.is_file() or os.access(path.parent, os.W_OK) or (wal.exists() and wal.stat().st_size > 0):
            raise
    except sqlite3.DatabaseError:
        conn.close()
        raise
    conn = _connect(uri + "?mode=ro&immutable=1", path, fix, connect)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _connect(uri: str, path: Path, fix: str, connect: dict[str, object]) -> "NamedConnection":
    conn = sqlite3.connect(uri, uri=True, factory=NamedConnection, **connect)  # type: ignore[call-overload]
    conn.path, conn.fix = path, fix
    return conn


def _named(conn: "NamedConnection", exc: sqlite3.DatabaseError) -> sqlite3.DatabaseError:
    """`exc` as DamagedRead naming the connection's file, when it is damage; else `exc` itself."""
    if isinstance(exc, DamagedRead) or not is_damage(exc):
        return exc
    named = DamagedRead(str(damaged(conn.path, str(exc), conn.fix)))
    named.sqlite_errorcode = exc.sqlite_errorcode
    named.sqlite_errorname = exc.sqlite_errorname
    return named


class NamedCursor(sqlite3.Cursor):
    """A cursor whose damage errors name the database file (see `DamagedRead`)."""

    connection: "NamedConnection"

    def execute(self, *args: Any) -> "NamedCursor":
        try:
            return super().execute(*args)
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None

    def executemany(self, *args: Any) -> "NamedCursor":
        try:
            return super().executemany(*args)
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None

    def fetchmany(self, *args: Any) -> list[Any]:
        try:
            return super().fetchmany(*args)
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            raise _named(self.connection, exc) from None


class NamedConnection(sqlite3.Connection):
    """A reader's connection that knows its file, so damage met at any query names it."""

    path: Path
    fix: str

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or NamedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)


def _create(path: Path) -> None:
    """Build a missing database beside its path and link it in: whole, or not there at all."""
    if path.exists():
        return
    # per process and thread: two threads of one process creating it at once must not share the temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    tmp.unlink(missing_ok=True)  # a leftover of a process that died while creating it
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")  # writes the header: the file is never empty again
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        tmp.unlink(missing_ok=True)


def _tighten(path: Path) -> None:
    """Databases of instances made before they were private: 0600 for the file and its -wal/-shm."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
        except FileNotFoundError:
            pass


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection: BEGIN IMMEDIATE, COMMIT, ROLLBACK on any exception
    (unless the failing statement already ended it)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def read_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of one query on a read-only connection; [] when the database or its table is not there (yet)."""
    if not Path(path).is_file():
        return []
    try:
        conn = open_reader(Path(path))
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
