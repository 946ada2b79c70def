"""Migrations for sense databases: apply pending files (run time) and generate new ones (development time).

Applying lives in `schema.apply`, generating in `schema.diff` (sqlite-utils is
imported only when generating); this module is the public face.
"""

from __future__ import annotations

from typing import Any

from nerve_cli.schema.apply import ENGINE_TABLES_SQL, apply_migrations, ensure_engine_tables, migration_files, split_statements

__all__ = [  # noqa: F822 (the generator's names load lazily, through __getattr__ below)
    "ENGINE_TABLES_SQL",
    "HEADER",
    "MigrationPlan",
    "apply_migrations",
    "ensure_engine_tables",
    "generate_migration",
    "load_specs",
    "migration_files",
    "plan_migration",
    "split_statements",
]

_DIFF_NAMES = {"HEADER", "MigrationPlan", "generate_migration", "load_specs", "plan_migration"}


def __getattr__(name: str) -> Any:
    # Workers only apply; keep the generator (and sqlite-utils) out of their import path.
    if name in _DIFF_NAMES:
        from nerve_cli.schema import diff

        return getattr(diff, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
