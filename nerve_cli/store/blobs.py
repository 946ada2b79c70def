"""Content-addressed blob store: `data/blobs/ab/cdef…`, keyed by the sha256 of the bytes.

A sense keeps large objects here and stores only the hash in its database.
Writes are atomic (temp file + fsync + os.replace) and de-duplicated: putting
bytes that are already stored only renews the file's time (`nerve gc` collects
a blob nothing refers to once it is older than `--older-than`). Safe across processes: two
writers of the same content race to an identical file.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.store.sqlitefile import private_dir

_SHA_RE = re.compile(r"^[0-9a-f]{64}\Z")


class BlobNotFound(NerveError):
    """No blob with that hash is stored."""

    type = ErrorType.BLOB_NOT_FOUND


class BlobStore:
    """Blobs under `root` (normally `<home>/data/blobs`)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"BlobStore({str(self.root)!r})"

    def path(self, sha: str) -> Path:
        """Where the blob `sha` lives (whether or not it exists)."""
        if not isinstance(sha, str) or not _SHA_RE.match(sha):
            raise ValueError(f"not a blob hash (64 lowercase hex characters): {sha!r}")
        return self.root / sha[:2] / sha[2:]

    def exists(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def put(self, data: bytes) -> str:
        """Store `data` and return its sha256 hex digest."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"BlobStore.put takes bytes, got {type(data).__name__}; encode text first")
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if self._touch(target):
            return sha  # content addressing: same hash, same bytes
        private_dir(target.parent)
        self._write_atomic(target, bytes(data))
        return sha

    def get(self, sha: str) -> bytes:
        try:
            return self.path(sha).read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(f"no blob {sha} in {self.root}") from None

    @staticmethod
    def _touch(target: Path) -> bool:
        """Mark a stored blob as just written: `nerve gc` counts a blob's age from its last put, so bytes put
        again by a compute that has not yet committed the row naming them are never old. False when absent."""
        try:
            os.utime(target)
        except FileNotFoundError:
            return False
        except OSError:  # a read-only filesystem: nothing is collected there either
            return target.is_file()
        return True

    @staticmethod
    def _write_atomic(target: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o400)  # blobs are immutable, and the owner's only
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        _fsync_dir(target.parent)


def _fsync_dir(path: Path) -> None:
    """Make the rename durable; best effort (some filesystems refuse O_RDONLY dirs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
