"""Reading history back across hot rows and archived JSONL: sense_history and read_logs."""

from __future__ import annotations

from pathlib import Path

from archive_data import day_ms, make_logs, make_sense

from nerve_cli.contract.times import parse_instant
from nerve_cli.home import Layout
from nerve_cli.store.archive import archive
from nerve_cli.store.history import newest, read_logs, sense_history

FIRST = 20_000
PER_DAY = 4


def archived(home: Path) -> Layout:
    layout = Layout(home)
    make_sense(layout, "cpu", FIRST, 10, PER_DAY)
    make_logs(layout, FIRST, 10, PER_DAY)
    assert archive(home, older_than_s=4 * 86400, now_ms=day_ms(FIRST + 10) + 1).ok  # days 0..5 archived
    return layout


def test_sense_history_reaches_into_the_archive(home: Path) -> None:
    archived(home)
    everything = sense_history(home, "cpu")
    assert len(everything) == 10 * PER_DAY
    assert [r["id"] for r in everything] == list(range(1, 41))
    assert everything[0]["payload"] == {"value": 0.0} and everything[0]["time"].startswith("2024-10-04")
    # only hot rows are needed
    assert [r["id"] for r in sense_history(home, "cpu", limit=3)] == [38, 39, 40]
    # more than the hot rows: the newest archived ones fill up the rest
    twenty = sense_history(home, "cpu", limit=20)
    assert [r["id"] for r in twenty] == list(range(21, 41))
    since = sense_history(home, "cpu", since_ms=day_ms(FIRST + 4))
    assert [r["id"] for r in since] == list(range(17, 41))
    assert sense_history(home, "nope") == []


def test_read_logs_merges_archive_only_when_since_reaches_it(home: Path) -> None:
    archived(home)
    hot = read_logs(home, limit=100)
    assert len(hot.rows) == 4 * PER_DAY and hot.archived_days == []
    old = read_logs(home, since_ms=day_ms(FIRST + 3), limit=100)
    assert old.archived_days == ["2024-10-07", "2024-10-08", "2024-10-09"]
    assert len(old.rows) == 7 * PER_DAY
    picked = read_logs(home, since_ms=day_ms(FIRST), source="reflex", limit=2)
    assert [r["source"] for r in picked.rows] == ["reflex", "reflex"]
    assert picked.rows[-1]["id"] == max(r["id"] for r in read_logs(home, since_ms=0, source="reflex").rows)


def test_read_logs_reports_a_truncated_archive_file(home: Path) -> None:
    layout = archived(home)
    path = layout.archive / "logs" / "2024-10-05.jsonl"
    path.write_bytes(path.read_bytes()[:-10])
    result = read_logs(home, since_ms=day_ms(FIRST), limit=None)
    assert len(result.rows) == 10 * PER_DAY - 1
    assert "2024-10-05.jsonl: line 4 is not valid JSON" in result.problems[0]


def test_newest_keeps_the_largest_ids_once() -> None:
    rows = [{"id": i} for i in (5, 1, 9, 3, 9, 7)]
    assert [r["id"] for r in newest(rows, 3)] == [5, 7, 9]
    assert [r["id"] for r in newest(rows, None)] == [1, 3, 5, 7, 9]


def test_parse_since() -> None:
    assert parse_instant("1h", now_ms=10_000_000) == 10_000_000 - 3_600_000
    assert parse_instant("2024-10-04", now_ms=0, utc=True) == day_ms(FIRST)
    assert parse_instant("2024-10-04T01:00Z", now_ms=0) == day_ms(FIRST) + 3_600_000
