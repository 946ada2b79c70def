"""Schema drift: schema.py says one thing, the migrations build another.

It happens when schema.py is edited and `nerve sense migrate` is forgotten.
Left alone, the engine hot-reloads the new code and every compute fails with
`table reading has no column named title`. Drift is found by applying the
sense's migration files to an in-memory database and comparing the result with
schema.py (no sqlite-utils, a few milliseconds), so `config check`, `doctor`,
`sense show` and the worker loading a sense all ask the same question here.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from nerve_cli.errors import ErrorType, SenseError
from nerve_cli.schema.apply import apply_migrations
from nerve_cli.schema.declare import TableSpec
from nerve_cli.schema.state import desired_schema, differences, read_schema

# What SQLite says when a statement names a column or table the database does not have.
_MISSING = re.compile(r"no such column|has no column named|no such table", re.IGNORECASE)


class SchemaDrift(SenseError):
    """schema.py and the sense's migrations disagree."""

    type = ErrorType.SCHEMA_DRIFT

    def __init__(self, sense: str, problems: list[str]) -> None:
        super().__init__(drift_message(sense, problems))
        self.sense = sense
        self.problems = problems


def migrate_hint(sense: str) -> str:
    return f"run `nerve sense migrate {sense}`"


def drift_message(sense: str, problems: list[str]) -> str:
    return (f"senses/{sense}/schema.py and its migrations disagree: {'; '.join(problems)}; "
            f"{migrate_hint(sense)} to generate the missing migration")


def schema_drift(specs: list[TableSpec], migrations_dir: Path) -> list[str]:
    """What differs between schema.py (`specs`) and what the migration files build; empty when in sync.

    Raises MigrationError when the files themselves cannot be applied.
    """
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        apply_migrations(conn, Path(migrations_dir))
        return differences(conn, read_schema(conn), desired_schema(specs))
    finally:
        conn.close()


def check_drift(sense: str, specs: list[TableSpec], migrations_dir: Path) -> None:
    """Raise SchemaDrift when schema.py and the migrations disagree."""
    problems = schema_drift(specs, migrations_dir)
    if problems:
        raise SchemaDrift(sense, problems)


def missing_object(message: str) -> bool:
    """True for SQLite's 'no such column/table' and 'has no column named' errors."""
    return bool(_MISSING.search(message))


def sql_hint(message: str, sense: str) -> str:
    """The hint appended to such an error from a compute: the database and schema.py may disagree."""
    return (f"{message} (if schema.py declares it, the database was not migrated: "
            f"{migrate_hint(sense)}, then the engine applies it)")
