"""@table declarations: column types, NOT NULL, defaults, names, errors, typed rows."""

from __future__ import annotations

import sqlite3
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from nerve_cli.errors import SenseError
from nerve_cli.schema.declare import from_row, spec_of, tables_of, to_row
from nerve_cli.schema.load import import_sense_module


def load_schema(tmp_path: Path, body: str, name: str = "demo"):
    sense_dir = tmp_path / "senses" / name
    sense_dir.mkdir(parents=True, exist_ok=True)
    (sense_dir / "schema.py").write_text(HEADER + textwrap.dedent(body))
    return import_sense_module(sense_dir, name, "schema", fresh=True)


HEADER = """
from __future__ import annotations
from datetime import datetime, date
from typing import Any, Optional
from nerve_cli.sdk import table, index
"""


def test_types_nullability_and_defaults(tmp_path):
    module = load_schema(tmp_path, """
    @table(pk="ts", time="ts", indexes=["value", index("value", "unit")], unique=[("label",)])
    class CpuSample:
        ts: int
        value: float
        label: str
        raw: bytes | None = None
        ok: bool = True
        unit: str | None = None
        note: Optional[str] = "foo (bar)"
        when: datetime | None = None
        day: date | None = None
        meta: dict[str, Any] | None = None
        tags: list | None = None
    """)
    [spec] = tables_of(module)
    assert spec.name == "cpu_sample"
    assert spec.pk == ("ts",)
    assert spec.time == "ts"
    cols = {c.name: (c.type, c.not_null) for c in spec.columns}
    assert cols == {
        "ts": ("INTEGER", False), "value": ("REAL", True), "label": ("TEXT", True), "raw": ("BLOB", False),
        "ok": ("INTEGER", True), "unit": ("TEXT", False), "note": ("TEXT", False), "when": ("TEXT", False),
        "day": ("TEXT", False), "meta": ("TEXT", False), "tags": ("TEXT", False),
    }
    assert [c.name for c in spec.columns][:3] == ["ts", "value", "label"]
    assert spec.column("note").default_sql() == "'foo (bar)'"
    assert spec.column("ok").default_sql() == "1"
    assert spec.column("unit").default_sql() is None
    assert [(i.columns, i.unique, i.name) for i in spec.indexes] == [
        (("value",), False, "idx_cpu_sample_value"),
        (("value", "unit"), False, "idx_cpu_sample_value_unit"),
        (("label",), True, "idx_cpu_sample_label"),
    ]


def test_string_defaults_are_sql_literals_that_sqlite_reads_back(tmp_path):
    module = load_schema(tmp_path, """
    @table()
    class T:
        a: str = "foo (bar)"
        b: str = "null"
        c: str = "it's"
        d: str = "CURRENT_TIMESTAMP"
    """)
    [spec] = tables_of(module)
    conn = sqlite3.connect(":memory:")
    for col in spec.columns:
        assert conn.execute(f"SELECT {col.default_sql()}").fetchone()[0] == col.default


def test_classes_are_kw_only_dataclasses_in_declaration_order(tmp_path):
    module = load_schema(tmp_path, """
    @table(pk="id")
    class Zeta:
        id: int
        name: str | None = None
        size: int

    @table(name="events")
    class Alpha:
        x: int
    """)
    assert [s.name for s in tables_of(module)] == ["zeta", "events"]
    obj = module.Zeta(size=3, id=1)
    assert obj.name is None
    with pytest.raises(TypeError):
        module.Zeta(1, None, 3)


def test_to_row_and_from_row_round_trip(tmp_path):
    module = load_schema(tmp_path, """
    @table(pk="id")
    class Item:
        id: int
        ok: bool
        meta: dict | None = None
        tags: list[str] | None = None
        when: datetime | None = None
    """)
    item = module.Item(id=1, ok=True, meta={"a": [1, 2]}, tags=["x"], when=datetime(2024, 1, 2, 3, 4, 5))
    row = to_row(item)
    assert row == {"id": 1, "ok": 1, "meta": '{"a":[1,2]}', "tags": '["x"]', "when": "2024-01-02T03:04:05"}
    assert from_row(module.Item, {**row, "rowid": 1}) == item
    assert spec_of(item).name == "item"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("@table()\nclass Bad:\n    x: set[int]\n", ["Bad.x", "unsupported type", "supported: int, float, str"]),
        ("@table()\nclass Bad:\n    x: Any\n", ["Bad.x", "unsupported type"]),
        ("@table(name='_private')\nclass Bad:\n    x: int\n", ["'_private'", "reserved"]),
        ("@table()\nclass _Hidden:\n    x: int\n", ["'_hidden'", "reserved"]),
        ("@table(time='ts')\nclass Bad:\n    x: int\n", ["time='ts'", "not a field"]),
        ("@table(time='x')\nclass Bad:\n    x: str\n", ["time='x'", "must be an int"]),
        ("@table(pk='id')\nclass Bad:\n    x: int\n", ["pk column 'id'"]),
        ("@table(indexes=['y'])\nclass Bad:\n    x: int\n", ["unknown column", "y"]),
        ("import dataclasses\n@table()\nclass Bad:\n    x: int = dataclasses.field(default_factory=int)\n", ["default_factory"]),
        ("@table()\nclass Bad:\n    x: int = 'five'\n", ["Bad.x", "does not fit"]),
        ("@table()\nclass Bad:\n    x: int = None\n", ["Bad.x", "Optional"]),
    ],
)
def test_declaration_errors_name_the_class_and_field(tmp_path, body, expected):
    with pytest.raises(SenseError) as info:
        load_schema(tmp_path, body)
    message = str(info.value)
    assert "schema.py" in message
    for part in expected:
        assert part in message


def test_two_classes_with_one_table_name_are_refused(tmp_path):
    module = load_schema(tmp_path, """
    @table(name="t")
    class A:
        x: int

    @table(name="t")
    class B:
        x: int
    """)
    with pytest.raises(SenseError, match="both named 't'"):
        tables_of(module)


def test_declaration_error_points_at_the_class_line(tmp_path):
    with pytest.raises(SenseError, match=r"schema.py:7: @table Bad: "):
        load_schema(tmp_path, "\n@table()\nclass Bad:\n    x: complex\n")


def test_index_names_must_be_unique_across_tables(tmp_path):
    module = load_schema(tmp_path, """
    @table(indexes=[index("x", name="by_x")])
    class A:
        x: int

    @table(indexes=[index("x", name="by_x")])
    class B:
        x: int
    """)
    with pytest.raises(SenseError, match="index name 'by_x' is used twice"):
        tables_of(module)


def test_a_time_column_is_indexed_for_the_archiver() -> None:
    from nerve_cli.schema.declare import table

    @table(pk="id", time="at")
    class Event:
        id: int
        at: int

    @table(pk="at", time="at")
    class Sample:
        at: int

    @table(pk="id", time="at", indexes=[("at", "id")])
    class Both:
        id: int
        at: int

    from nerve_cli.schema.declare import spec_of

    assert [i.columns for i in spec_of(Event).indexes] == [("at",)]
    assert spec_of(Sample).indexes == ()  # the primary key already orders by it
    assert [i.columns for i in spec_of(Both).indexes] == [("at", "id")]
