"""Migrations for sense databases: apply pending files (run time) and generate new ones (development time).

Applying lives in `schema.apply`, generating in `schema.diff`; this module is the public face.
"""

from __future__ import annotations

from nerve_cli.schema.apply import ENGINE_TABLES_SQL, apply_migrations, ensure_engine_tables, migration_files, split_statements

__all__ = [
    "ENGINE_TABLES_SQL",
    "apply_migrations",
    "ensure_engine_tables",
    "migration_files",
    "split_statements",
]
