"""Reading a sense's database from the CLI: read-only, tolerant of what does not exist yet."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nerve_cli.errors import SenseError
from nerve_cli.store.sqlitefile import open_reader


def read_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple] | None:
    """Rows of `sql` on a read-only connection; None when the db or the table does not exist yet."""
    if not path.is_file():
        return None
    try:
        conn = open_reader(path)
    except sqlite3.Error as exc:  # damaged, or unreadable
        raise SenseError(f"cannot read {path}: {exc}") from exc
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise SenseError(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()
