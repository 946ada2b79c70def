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
        indexes = {i.name or "": IndexState(i.name or "", i.columns, i.unique) for i in spec.indexes}
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


def differences(conn: sqlite3.Connection, built: dict[str, TableState], declared: dict[str, TableState]) -> list[str]:
    """One readable line per difference between the migrations' schema and schema.py (empty when they match).

    Worded for someone who just edited schema.py: drift reports show them, and
    a generated migration is verified with them.
    """
    out = [f"table {n} is in schema.py but no migration creates it" for n in declared if n not in built]
    out += [f"table {n} is in the migrations but not in schema.py" for n in built if n not in declared]
    for name in (n for n in declared if n in built):
        have, want = built[name], declared[name]
        out += [f"column {name}.{c} is in schema.py but not in the migrations" for c in want.columns if c not in have.columns]
        out += [f"column {name}.{c} is in the migrations but not in schema.py" for c in have.columns if c not in want.columns]
        for col in (c for c in want.columns if c in have.columns):
            if column_differs(conn, have.columns[col], want.columns[col], col in want.pk):
                out.append(f"column {name}.{col} is {_column_text(want.columns[col])} in schema.py "
                           f"but {_column_text(have.columns[col])} in the migrations")
        if have.pk != want.pk:
            out.append(f"table {name}: primary key {_pk(want.pk)} in schema.py but {_pk(have.pk)} in the migrations")
        if set(have.indexes.values()) != set(want.indexes.values()):
            out.append(f"table {name}: indexes {sorted(want.indexes)} in schema.py but {sorted(have.indexes)} in the migrations")
    return out


def _column_text(col: ColumnState) -> str:
    text = col.type + (" NOT NULL" if col.not_null else "")
    return text + (f" DEFAULT {col.default}" if col.default is not None else "")


def _pk(pk: tuple[str, ...]) -> str:
    return f"({', '.join(pk)})" if pk else "(rowid)"


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
