"""`nerve sense migrate` as a library call: generate for one or every sense of an instance, then commit."""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.config.model import check_name
from nerve_cli.errors import NerveError, SenseError
from nerve_cli.home import Layout
from nerve_cli.instance.change import Change
from nerve_cli.schema.apply import split_statements
from nerve_cli.schema.diff import generate


@dataclass
class SenseMigration:
    """The outcome for one sense: a written file, nothing to do, or an error message."""

    sense: str
    path: Path | None = None
    changes: list[str] = field(default_factory=list)
    statements: int = 0
    error: str | None = None


def senses_with_schema(home: Path) -> list[str]:
    """Every sense folder under senses/ that has a schema.py, sorted."""
    root = Layout(home).senses
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "schema.py").is_file())


def migrate_senses(
    home: Path, names: list[str] | None = None, *, allow_data_loss: bool = False, name: str | None = None
) -> tuple[list[SenseMigration], str | None]:
    """Generate the next migration for `names` (None: every sense); commit written files.

    With one name, a problem raises; with several, each sense's problem is reported in
    its result and the others still proceed. Returns the results and the commit sha (or None).
    """
    layout = Layout(home)
    single = names is not None and len(names) == 1
    results = []
    for sense in names if names is not None else senses_with_schema(home):
        result = SenseMigration(sense)
        try:
            sense_dir = _sense_dir(layout, sense)
            path, plan = generate(sense_dir, allow_data_loss=allow_data_loss, name=name,
                                  rows_in=functools.partial(_rows_in, layout.sense_db(sense)))
        except NerveError as exc:
            if single:
                raise
            result.error = str(exc)
        else:
            if path is not None:
                result.path, result.changes = path, plan.changes
                result.statements = len(split_statements(path.read_text(encoding="utf-8")))
        results.append(result)
    return results, _commit(home, [r for r in results if r.path])


def _rows_in(database: Path, table: str) -> int:
    """Rows a sense's database holds in `table` now (0 when it or the table does not exist: a scaffold's own
    example table, never run, loses nothing); read-only, and a file that cannot be read holds some."""
    if not database.is_file():
        return 0
    try:
        conn = sqlite3.connect(database.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
            return 0 if found is None else conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 1  # cannot tell: count it as data


def _sense_dir(layout: Layout, sense: str) -> Path:
    try:
        check_name(sense)
    except ValueError as exc:
        raise SenseError(f"sense {exc}") from None
    sense_dir = layout.sense_dir(sense)
    if not (sense_dir / "schema.py").is_file():
        raise SenseError(f"no sense {sense!r}: {sense_dir / 'schema.py'} does not exist; "
                         f"create it with `nerve sense new {sense}`")
    return sense_dir


def _commit(home: Path, written: list[SenseMigration]) -> str | None:
    """One commit with each new migration and the schema.py it was generated from (the pair belongs together)."""
    if not written:
        return None

    what = ", ".join(f"{r.sense} ({r.path.name})" for r in written if r.path)
    paths = [p for r in written if r.path for p in (r.path, r.path.parent.parent / "schema.py")]
    return Change(home, f"sense migrate {what}", paths).commit()
