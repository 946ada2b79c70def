"""Archived log lines: SQLite builds most of them; each reads back exactly as the Python encoding of its row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
from archive_data import day_ms, make_logs

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.jsonl import encode, iter_lines
from nerve_cli.store.logs import LogStore, dumps, log_row

FIRST = 20_000

# (source, type, ref_id, payload, ts offset): every kind of row the SQLite line and orjson could disagree on
ODD_ROWS = [
    ("system", "tick", None, dumps({"n": 1, "f": 0.1, "big": 2**63 - 1, "neg": -5, "ü": "✓ \"q\" \\ /"}), 1),
    ("system", "tick", None, None, 2),
    ("system", "tick", None, "not json at all", 3),
    ("system", "tick", None, '{\n  "pretty": [1, 2,\n 3]\n}', 4),
    ("system", "tick", None, "123456789012345678901234567890", 5),
    ("system", "tick", None, '{"x": 1e400}', 6),
    ("system", "tick", None, '{"x": -1E+309}', 7),
    ("system", "tick", None, '{"x": 1e-400, "y": 1E5, "z": -0}', 8),
    ("system", "tick", None, '{"s": "\\ud800"}', 9),
    ("system", "tick", None, '{"s": "\\u00e9 \\u001b"}', 10),
    ("system", "tick", None, "[" * 200 + "]" * 200, 11),
    ("system", "tick", None, "[" * 1100 + "]" * 1100, 11),
    ("system", "tick", None, '{"long": "' + "x" * 5000 + '"}', 12),
    ("system", "tick", None, '"just a string"', 13),
    ("system", "tick", None, "  [1, 2]  ", 14),
    ("system", "tick", None, '{"a": 1, "a": 2}', 15),
    ("system", "tick", None, b'{"blob": true}', 16),
    ("line\nbreak\tand \x01", "ctrl \u2028", "ref", "{}", 17),
]


def odd_logs(home: Path) -> tuple[Layout, dict[int, tuple]]:
    """Plain days before and after one day of odd rows, a BLOB source among them; the rows as stored."""
    layout = Layout(home)
    make_logs(layout, FIRST, 3, 30)
    conn = sqlite3.connect(layout.logs_db)
    day = day_ms(FIRST + 1)
    conn.executemany("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, ?, ?, ?, ?)",
                     [(s, t, r, p, day + 3_600_000 * 3 + off) for s, t, r, p, off in ODD_ROWS])
    conn.execute("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES ('system', 'tick', NULL, '{}', ?)",
                 (day + 3_600_000 * 3 + 20.123456,))  # a fractional ts, written by hand
    # a BLOB source (SQLite's JSON refuses it) on a day of its own, so it does not hide the rows above
    conn.execute("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES (?, 'tick', NULL, '{}', ?)",
                 (b"\x00blob", day_ms(FIRST + 2) + 18))
    conn.commit()
    rows = {row[0]: row for row in conn.execute("SELECT id, source, type, ref_id, payload, ts FROM logs")}
    conn.close()
    return layout, rows


def kernel_written(row: tuple) -> bool:
    """A row as LogStore writes it: text columns, an integer ts, a payload orjson wrote (or none)."""
    _, source, type_, ref_id, payload, ts = row
    if not (isinstance(source, str) and isinstance(type_, str) and isinstance(ts, int)):
        return False
    try:
        return payload is None or payload == dumps(orjson.loads(payload))
    except orjson.JSONDecodeError:
        return False


def test_every_line_reads_back_as_the_python_encoding_of_its_row(home: Path) -> None:
    layout, rows = odd_logs(home)
    report = archive(home, older_than_s=86400, now_ms=day_ms(FIRST + 4) + 1)
    assert report.ok, report.problems
    assert report.rows == len(rows)
    seen = 0
    for path in sorted((layout.archive / "logs").glob("*.jsonl")):
        raw = path.read_bytes().splitlines(keepends=True)
        parsed = list(iter_lines(path))
        assert len(raw) == len(parsed)  # every line reads
        assert [line["id"] for line in parsed] == sorted(line["id"] for line in parsed)
        for text, line in zip(raw, parsed):
            stored = rows[line["id"]]
            expected = encode(log_row(stored))
            assert line == orjson.loads(expected), (stored, text)
            if kernel_written(stored):
                assert text == expected  # the kernel's own rows: the same bytes as before
            seen += 1
    assert seen == len(rows)


def test_the_time_field_is_the_rows_iso_time_to_the_millisecond(home: Path) -> None:
    layout = Layout(home)
    LogStore(layout.logs_db).close()
    conn = sqlite3.connect(layout.logs_db)
    day = day_ms(FIRST)
    stamps = [0, 1, 999, 1000, 59_999, 60_000, 3_599_999, 3_600_000, 43_200_123, 86_399_999]
    conn.executemany("INSERT INTO logs (source, type, payload, ts) VALUES ('system', 'tick', '{}', ?)",
                     [(day + s,) for s in stamps])
    conn.commit()
    conn.close()
    assert archive(home, older_than_s=86400, now_ms=day_ms(FIRST + 2) + 1).ok
    lines = list(iter_lines(layout.archive / "logs" / f"{day_str(FIRST)}.jsonl"))
    assert [line["time"] for line in lines] == [
        f"{day_str(FIRST)}T00:00:00.000Z", f"{day_str(FIRST)}T00:00:00.001Z", f"{day_str(FIRST)}T00:00:00.999Z",
        f"{day_str(FIRST)}T00:00:01.000Z", f"{day_str(FIRST)}T00:00:59.999Z", f"{day_str(FIRST)}T00:01:00.000Z",
        f"{day_str(FIRST)}T00:59:59.999Z", f"{day_str(FIRST)}T01:00:00.000Z", f"{day_str(FIRST)}T12:00:00.123Z",
        f"{day_str(FIRST)}T23:59:59.999Z",
    ]
