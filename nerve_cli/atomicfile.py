"""Files written whole or not at all, through a temporary file no one else can have planted.

The temporary file is made by `tempfile.mkstemp` in the target's folder:
a fresh random name opened with O_CREAT | O_EXCL (and O_NOFOLLOW), so a
link planted at a predictable name (`.sense.py.<pid>.new`) is never
written through. Then fsync, `os.replace` and an fsync of the folder:
readers see the old file or the new one, never half of it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` (text is UTF-8). `mode`: the new file's permissions (default: the old
    file's, else mkstemp's 0600 made 0644)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
