"""Turn an exception raised by (or while loading) user code into the `ErrorInfo` the user needs.

The file and line are those of the deepest frame inside the sense's own folder:
that is the line to fix, even when the exception was raised deeper in a
library or in Nerve's SenseDB. The traceback starts at the first user frame,
so Nerve's own frames and the import machinery don't bury it.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from nerve_cli.wire.protocol import ErrorInfo

_PACKAGE_DIR = Path(os.path.realpath(__file__)).parents[1]


def _real(path: str | Path) -> Path:
    # os.path.realpath, not Path.resolve: on a symlink loop resolve raises RuntimeError,
    # which turned one sense's looping folder into a crash of its whole group at load
    return Path(os.path.realpath(path))


def _inside(filename: str | None, folder: Path) -> bool:
    if not filename:
        return False
    try:
        _real(filename).relative_to(folder)
        return True
    except (ValueError, OSError):
        return False


def shown_path(filename: str, home: Path | None) -> str:
    """`senses/x/sense.py` when under the instance folder, else the path as given."""
    if home is not None:
        try:
            return str(_real(filename).relative_to(_real(home)))
        except (ValueError, OSError):
            pass
    return filename


def error_info(exc: BaseException, sense_dir: Path, home: Path | None = None, *,
               message: str | None = None) -> ErrorInfo:
    """ErrorInfo for `exc`, located in the user's files under `sense_dir` where possible."""
    folder = _real(sense_dir)
    frames = traceback.extract_tb(exc.__traceback__)
    user = [i for i, f in enumerate(frames) if _inside(f.filename, folder)]
    file: str | None = None
    line: int | None = None
    if isinstance(exc, SyntaxError) and _inside(exc.filename, folder):
        file, line = exc.filename, exc.lineno
    elif user:
        deepest = frames[user[-1]]
        file, line = deepest.filename, deepest.lineno
    shown = [f for f in (frames[user[0]:] if user else frames) if _foreign(f.filename)]
    return ErrorInfo(
        type=type(exc).__name__,
        message=message if message is not None else _message(exc),
        traceback=_format(exc, shown),
        file=shown_path(file, home) if file else None,
        line=line,
    )


def _message(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return exc.msg or str(exc)
    return str(exc) or type(exc).__name__


def _foreign(filename: str) -> bool:
    """Neither Nerve's own code nor the import machinery: worth showing when no user frame is."""
    return not filename.startswith("<frozen") and not _inside(filename, _PACKAGE_DIR)


def _format(exc: BaseException, frames: list[traceback.FrameSummary]) -> str:
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(frames)
    text = "".join(te.format()).rstrip()
    if not frames:  # "Traceback (most recent call last):" over nothing reads as a bug
        text = "".join(te.format_exception_only()).rstrip()
    return text
