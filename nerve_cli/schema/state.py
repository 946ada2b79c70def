"""A comparable picture of a database schema: what SQLite has, and what schema.py declares.

Both sides are reduced to the same `TableState` so generation can diff them and
verification can check that the generated SQL lands exactly on schema.py.
Defaults are compared by value (SQLite evaluates both literals), not by spelling.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from nerve_cli.schema.declare import TableSpec


@dataclass(frozen=True)
class ColumnState:
    name: str
    type: str
    not_null: bool
    default: str | None  # SQL literal text, None when there is no DEFAULT clause


@dataclass(frozen=True)
class IndexState:
    name: str
    columns: tuple[str, ...]
    unique: bool


@dataclass
class TableState:
    name: str
    columns: dict[str, ColumnState]  # in table order
    pk: tuple[str, ...]
    indexes: dict[str, IndexState] = field(default_factory=dict)


def is_user_table(name: str) -> bool:
    """Tables that migrations manage: not the engine's (`_*`) and not SQLite's own."""
    return not name.startswith("_") and not name.lower().startswith("sqlite_")


def read_schema(conn: sqlite3.Connection) -> dict[str, TableState]:
    """The user tables of a live database, with their columns, primary key and CREATE INDEX indexes."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    return {name: _read_table(conn, name) for name in names if is_user_table(name)}


def _read_table(conn: sqlite3.Connection, name: str) -> TableState:
    info = conn.execute(f"PRAGMA table_info({_q(name)})").fetchall()
    columns = {r[1]: ColumnState(r[1], (r[2] or "").upper(), bool(r[3]), r[4]) for r in info}
    pk = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
    indexes = {}
    for _seq, index_name, unique, origin, _partial in conn.execute(f"PRAGMA index_list({_q(name)})").fetchall():
        if origin != "c":
            continue  # pk/unique constraints belong to the table definition
        cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({_q(index_name)})").fetchall())
        indexes[index_name] = IndexState(index_name, cols, bool(unique))
    return TableState(name, columns, pk, indexes)


def desired_schema(specs: list[TableSpec]) -> dict[str, TableState]:
    """What schema.py declares, as TableStates in declaration order."""
    out = {}
    for spec in specs:
        columns = {c.name: ColumnState(c.name, c.type, c.not_null, c.default_sql()) for c in spec.columns}
        indexes = {i.name: IndexState(i.name or "", i.columns, i.unique) for i in spec.indexes}
        out[spec.name] = TableState(spec.name, columns, spec.pk, indexes)
    return out


def default_value(conn: sqlite3.Connection, literal: str | None) -> tuple | None:
    """A DEFAULT literal as (typeof, value) so `5`, `5.0` and `'5'` compare honestly."""
    if literal is None:
        return None
    try:
        return tuple(conn.execute(f"SELECT typeof({literal}), {literal}").fetchone())
    except sqlite3.Error:
        return ("expr", literal)


def column_differs(conn: sqlite3.Connection, have: ColumnState, want: ColumnState, in_pk: bool) -> bool:
    """True when the column needs a rebuild. NOT NULL is not compared on pk columns (SQLite keeps its own rules there)."""
    if have.type != want.type:
        return True
    if not in_pk and have.not_null != want.not_null:
        return True
    return default_value(conn, have.default) != default_value(conn, want.default)


def differences(conn: sqlite3.Connection, have: dict[str, TableState], want: dict[str, TableState]) -> list[str]:
    """Human-readable differences between two schemas (empty when they match); used to verify a generated file."""
    problems = [f"table {n}: missing" for n in want if n not in have]
    problems += [f"table {n}: not declared" for n in have if n not in want]
    for name in (n for n in want if n in have):
        h, w = have[name], want[name]
        if set(h.columns) != set(w.columns):
            problems.append(f"table {name}: columns {sorted(h.columns)} != {sorted(w.columns)}")
        for col in set(h.columns) & set(w.columns):
            if column_differs(conn, h.columns[col], w.columns[col], col in w.pk):
                problems.append(f"table {name}: column {col} is {h.columns[col]}, schema.py says {w.columns[col]}")
        if h.pk != w.pk:
            problems.append(f"table {name}: pk {h.pk} != {w.pk}")
        if set(h.indexes.values()) != set(w.indexes.values()):
            problems.append(f"table {name}: indexes {sorted(h.indexes)} != {sorted(w.indexes)}")
    return problems


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
