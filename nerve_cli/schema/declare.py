"""`@table` turns a class in a sense's schema.py into a dataclass plus a `TableSpec`.

The spec is what migrations are generated from; the dataclass is what sense code
inserts and reads (`to_row` / `from_row` convert between the two).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
import types
import typing
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Iterable

from nerve_cli.errors import SenseError

# Python annotation -> (SQL type, value kind used by to_row/from_row).
_SCALARS: dict[Any, tuple[str, str]] = {
    bool: ("INTEGER", "bool"),
    int: ("INTEGER", "int"),
    float: ("REAL", "float"),
    str: ("TEXT", "str"),
    bytes: ("BLOB", "bytes"),
    datetime: ("TEXT", "datetime"),
    date: ("TEXT", "date"),
    dict: ("TEXT", "json"),
    list: ("TEXT", "json"),
}
SUPPORTED = "int, float, str, bytes, bool, datetime, date, dict/list (stored as JSON), or X | None of these"
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")
SPEC_ATTR = "__nerve_table__"


@dataclass(frozen=True)
class Column:
    """One column: SQL type, NOT NULL, and the Python default (`has_default` tells None from absent)."""

    name: str
    type: str
    not_null: bool
    kind: str
    has_default: bool = False
    default: Any = None

    def default_sql(self) -> str | None:
        """The default as an SQL literal, or None when the column has no DEFAULT clause."""
        if not self.has_default or self.default is None:
            return None
        return sql_literal(self.default)


@dataclass(frozen=True)
class IndexSpec:
    """An index over `columns`; `unique` for `unique=` entries. Name is `idx_<table>_<cols>`."""

    columns: tuple[str, ...]
    unique: bool = False
    name: str | None = None


def index(*columns: str, unique: bool = False, name: str | None = None) -> IndexSpec:
    """An index declaration for `@table(indexes=[index("a", "b")])`."""
    return IndexSpec(tuple(columns), unique, name)


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    pk: tuple[str, ...]
    indexes: tuple[IndexSpec, ...]
    time: str | None
    cls: type

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


def sql_literal(value: Any) -> str:
    """A Python default as an SQL literal (strings quoted by us: sqlite-utils would read `a (b)` as SQL)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    if isinstance(value, (datetime, date)):
        value = value.isoformat()
    return "'" + str(value).replace("'", "''") + "'"


def snake_case(name: str) -> str:
    """`CpuSample` -> `cpu_sample`, `HTTPRequest` -> `http_request`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def table(
    cls: type | None = None,
    *,
    name: str | None = None,
    pk: str | Iterable[str] | None = None,
    indexes: Iterable[Any] = (),
    unique: Iterable[Any] = (),
    time: str | None = None,
) -> Any:
    """Declare a table: `@table(pk="ts", time="ts")` above a class with annotated fields.

    The class becomes a `dataclass(kw_only=True)`; its `TableSpec` drives migrations.
    """

    def wrap(klass: type) -> type:
        data_cls: type = dataclass(kw_only=True)(klass)
        spec = _build_spec(data_cls, name, pk, indexes, unique, time)
        setattr(data_cls, SPEC_ATTR, spec)
        return data_cls

    return wrap(cls) if cls is not None else wrap


def spec_of(cls_or_obj: Any) -> TableSpec:
    spec = getattr(cls_or_obj, SPEC_ATTR, None)
    if not isinstance(spec, TableSpec):
        what = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
        raise SenseError(f"{what.__qualname__} is not a table: decorate it with @table in schema.py")
    return spec


def tables_of(module: types.ModuleType) -> list[TableSpec]:
    """Every `@table` class defined in `module`, in declaration order; duplicate table names refused."""
    specs: list[TableSpec] = []
    seen: dict[str, str] = {}
    for value in vars(module).values():
        spec = getattr(value, SPEC_ATTR, None)
        if not isinstance(spec, TableSpec) or spec.cls is not value:
            continue
        if value.__module__ != module.__name__:
            continue  # imported from elsewhere; the defining schema owns it
        if spec.name in seen:
            raise SenseError(
                f"{_where(value)}: tables {seen[spec.name]} and {value.__qualname__} are both named "
                f"{spec.name!r}; give one of them @table(name=...)"
            )
        seen[spec.name] = value.__qualname__
        specs.append(spec)
    _check_index_names(module, specs)
    return specs


def _check_index_names(module: types.ModuleType, specs: list[TableSpec]) -> None:
    """Index names are global in SQLite, so two tables cannot share one."""
    owner: dict[str, str] = {}
    for spec in specs:
        for ix in spec.indexes:
            if ix.name is None:
                continue
            if ix.name in owner:
                raise SenseError(
                    f"{getattr(module, '__file__', module.__name__)}: index name {ix.name!r} is used twice "
                    f"({owner[ix.name]} and {spec.name}); give one index(..., name=...) another name"
                )
            owner[ix.name] = spec.name


# --- building the spec -------------------------------------------------------


def _where(cls: type) -> str:
    """`path/schema.py:LINE` of the class (only computed on errors, so the source lookup is affordable)."""
    module = sys.modules.get(cls.__module__)
    where = getattr(module, "__file__", None) or cls.__module__
    try:
        return f"{where}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return where


def _fail(cls: type, message: str) -> SenseError:
    return SenseError(f"{_where(cls)}: @table {cls.__qualname__}: {message}")


def _build_spec(cls: type, name: str | None, pk: Any, indexes: Iterable[Any], unique: Iterable[Any],
                time: str | None) -> TableSpec:
    table_name = name or snake_case(cls.__name__)
    if table_name.startswith("_") or table_name.lower().startswith("sqlite_"):
        raise _fail(cls, f"table name {table_name!r} is reserved (names starting with '_' or 'sqlite_' belong to the "
                         "engine); pick another name")
    if not _NAME_RE.match(table_name):
        raise _fail(cls, f"table name {table_name!r} must be letters, digits and '_', starting with a letter")
    pk_cols = _pk_tuple(cls, pk)
    hints = _hints(cls)
    columns = tuple(_column(cls, f, hints[f.name], f.name in pk_cols, len(pk_cols) == 1) for f in _fields(cls))
    names = [c.name for c in columns]
    if not columns:
        raise _fail(cls, "a table needs at least one annotated field")
    for col in pk_cols:
        if col not in names:
            raise _fail(cls, f"pk column {col!r} is not a field; fields: {', '.join(names)}")
    specs = _indexes(cls, table_name, names, indexes, False) + _indexes(cls, table_name, names, unique, True)
    _check_time(cls, columns, time)
    specs += _time_index(table_name, pk_cols, specs, time)
    return TableSpec(table_name, columns, pk_cols, tuple(specs), time, cls)


def _time_index(table_name: str, pk_cols: tuple[str, ...], specs: list[IndexSpec], time: str | None) -> list[IndexSpec]:
    """The archiver selects one day at a time by the time column: make sure that is an index lookup, not a scan."""
    if time is None or (pk_cols and pk_cols[0] == time) or any(i.columns[0] == time for i in specs):
        return []
    return [IndexSpec((time,), False, f"idx_{table_name}_{time}")]


def _fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f._field_type is dataclasses._FIELD]  # type: ignore[attr-defined]


def _pk_tuple(cls: type, pk: Any) -> tuple[str, ...]:
    if pk is None:
        return ()
    if isinstance(pk, str):
        return (pk,)
    cols = tuple(pk)
    if not cols or not all(isinstance(c, str) for c in cols):
        raise _fail(cls, f"pk must be a column name or a tuple of names, got {pk!r}")
    return cols


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:  # a NameError in a string annotation, typically
        raise _fail(cls, f"cannot resolve the annotations ({exc}); import every type the fields use") from exc


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _column(cls: type, field: dataclasses.Field, annotation: Any, is_pk: bool, single_pk: bool) -> Column:
    inner, optional = _unwrap_optional(annotation)
    base = typing.get_origin(inner) or inner
    if base not in _SCALARS:
        shown = getattr(annotation, "__name__", None) or repr(annotation)
        raise _fail(cls, f"field {cls.__qualname__}.{field.name}: unsupported type {shown}; supported: {SUPPORTED}")
    sql_type, kind = _SCALARS[base]
    if field.default_factory is not dataclasses.MISSING:
        raise _fail(cls, f"field {cls.__qualname__}.{field.name}: default_factory is not supported (a database "
                         "default must be a constant); use a constant default or make it Optional")
    has_default = field.default is not dataclasses.MISSING
    if has_default and field.default is not None:
        _check_default(cls, field, kind)
    if has_default and field.default is None and not optional:
        raise _fail(cls, f"field {cls.__qualname__}.{field.name}: default None needs an Optional type "
                         f"({sql_type.lower()} | None)")
    # A lone INTEGER primary key is the rowid and can never be NULL; any other key column could be,
    # and a NULL key matches nothing on upsert, so it is NOT NULL unless declared Optional.
    rowid = is_pk and single_pk and sql_type == "INTEGER"
    return Column(field.name, sql_type, not optional and not rowid, kind, has_default, field.default if has_default else None)


def _check_default(cls: type, field: dataclasses.Field, kind: str) -> None:
    allowed: dict[str, type | tuple[type, ...]] = {"bool": bool, "int": int, "float": (int, float), "str": str,
                                                   "bytes": bytes, "datetime": datetime, "date": date}
    ok = kind != "json" and isinstance(field.default, allowed[kind]) and not (kind == "int" and isinstance(field.default, bool))
    if not ok:
        raise _fail(cls, f"field {cls.__qualname__}.{field.name}: default {field.default!r} does not fit the column "
                    f"({'JSON columns cannot have a default; make it Optional' if kind == 'json' else 'expected ' + kind})")


def _indexes(cls: type, table_name: str, names: list[str], entries: Iterable[Any], unique: bool) -> list[IndexSpec]:
    out: list[IndexSpec] = []
    for entry in entries:
        if isinstance(entry, IndexSpec):
            cols, is_unique, given = entry.columns, entry.unique or unique, entry.name
        elif isinstance(entry, str):
            cols, is_unique, given = (entry,), unique, None
        else:
            cols, is_unique, given = tuple(entry), unique, None
        missing = [c for c in cols if c not in names]
        if not cols or missing:
            unknown = ", ".join(missing) or "(none given)"
            raise _fail(cls, f"index {cols!r} names unknown column(s) {unknown}; fields: {', '.join(names)}")
        out.append(IndexSpec(cols, is_unique, given or f"idx_{table_name}_{'_'.join(cols)}"))
    return out


def _check_time(cls: type, columns: tuple[Column, ...], time: str | None) -> None:
    if time is None:
        return
    col = next((c for c in columns if c.name == time), None)
    if col is None:
        raise _fail(cls, f"time={time!r} is not a field; it must name an int field holding unix milliseconds")
    if col.kind != "int":
        raise _fail(cls, f"time={time!r} must be an int field (unix milliseconds), not {col.kind}")


# --- typed rows ---------------------------------------------------------------


def to_row(obj: Any) -> dict[str, Any]:
    """A `@table` instance as a dict of SQLite values (JSON for dict/list, 0/1 for bool, ISO text for dates)."""
    spec = spec_of(obj)
    return {c.name: _encode(c.kind, getattr(obj, c.name)) for c in spec.columns}


def from_row(cls: type, row: dict[str, Any]) -> Any:
    """Build a `@table` instance from a row dict; unknown keys (rowid, ...) are ignored."""
    spec = spec_of(cls)
    values = {c.name: _decode(c.kind, row[c.name]) for c in spec.columns if c.name in row}
    return cls(**values)


def _encode(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "bool":
        return int(bool(value))
    if kind == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if kind in ("datetime", "date") and isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def _decode(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "bool":
        return bool(value)
    if kind == "json":
        return json.loads(value) if isinstance(value, (str, bytes)) else value
    if kind == "datetime" and isinstance(value, str):
        return datetime.fromisoformat(value)
    if kind == "date" and isinstance(value, str):
        return date.fromisoformat(value)
    return value
