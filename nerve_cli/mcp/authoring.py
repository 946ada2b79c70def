"""What an agent may write through `nerve mcp`: a sense's own two files, nothing else.

The sense must exist (`new_sense` scaffolds it), its name is checked by the
naming rule (so no path can leave senses/NAME/), and the file is one of
`sense.py` and `schema.py`. The text is written whole (a temporary file, then
a rename) and committed as `nerve: mcp write senses/NAME/FILE`, after any
uncommitted hand edit of that file is committed on its own, as every Nerve
command does. The engine reloads the sense by itself; schema.py wants
`migrate_sense` next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.atomicfile import write_atomic
from nerve_cli.config.model import check_name
from nerve_cli.contract import VERSION
from nerve_cli.errors import SenseError, UsageError
from nerve_cli.home import Layout
from nerve_cli.instance.change import Change

FILES = ("sense.py", "schema.py")
MAX_TEXT = 1024 * 1024  # bytes of one file


def write_sense_file(home: Path, sense: str, file: str, text: str) -> dict[str, Any]:
    try:
        check_name(sense)
    except ValueError as exc:
        raise SenseError(f"invalid sense name: {exc}") from None
    if file not in FILES:
        raise UsageError(f"file must be one of {', '.join(FILES)}, got {file!r}")
    data = text.encode("utf-8")
    if len(data) > MAX_TEXT:
        raise UsageError(f"{file} would be {len(data):,} bytes; at most {MAX_TEXT:,}")
    layout = Layout(Path(home))
    folder = layout.sense_dir(sense)
    if not folder.is_dir():
        raise SenseError(f"senses/{sense}/ does not exist; scaffold it first with new_sense")
    path = folder / file
    relative = path.relative_to(layout.home)
    if path.is_file() and path.read_bytes() == data:
        return _document(sense, file, relative, len(data), False, None)
    change = Change(layout.home, f"mcp write {relative}", [path])
    change.protect()
    write_atomic(path, data)  # never through a file planted at a predictable temporary name
    return _document(sense, file, relative, len(data), True, change.commit([path]))


def _document(sense: str, file: str, path: Path, size: int, changed: bool, commit: str | None) -> dict[str, Any]:
    """The `sense-file` document."""
    return {"version": VERSION, "sense": sense, "file": file, "path": str(path), "bytes": size, "changed": changed,
            "commit": commit}
