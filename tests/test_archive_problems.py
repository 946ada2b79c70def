"""Bad input for the archiver: unwritable folder, leftover/truncated files, a watermark ahead of the data."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from archive_data import census, day_ms, db_count, make_logs, make_sense, meta
from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.jsonl import iter_lines

FIRST = 20_000
NOW = day_ms(FIRST + 10) + 3_600_000
DAYS_3 = 3 * 86400


def build(home: Path) -> Layout:
    layout = Layout(home)
    make_logs(layout, FIRST, 10, 24)
    make_sense(layout, "cpu", FIRST, 10, 6)
    return layout


def test_unwritable_archive_folder_deletes_nothing(home: Path) -> None:
    layout = build(home)
    layout.archive.mkdir(parents=True)
    (layout.archive / "logs").write_text("a file where the folder should be\n")
    with pytest.raises(NerveError, match=r"cannot write to archive folder .*logs.*Nothing was archived"):
        archive(home, older_than_s=DAYS_3, now_ms=NOW)
    assert db_count(layout.logs_db, "logs") == 240
    assert db_count(layout.sense_db("cpu"), "_signals") == 60
    assert meta(layout.logs_db, "archived_up_to") is None
    assert not (layout.archive / "senses" / "cpu").exists() or not list((layout.archive / "senses").rglob("*.jsonl"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_read_only_archive_folder_deletes_nothing(home: Path) -> None:
    layout = build(home)
    (layout.archive / "logs").mkdir(parents=True)
    os.chmod(layout.archive / "logs", 0o500)
    try:
        with pytest.raises(NerveError, match="cannot write to archive folder"):
            archive(home, older_than_s=DAYS_3, now_ms=NOW)
    finally:
        os.chmod(layout.archive / "logs", 0o700)
    assert db_count(layout.logs_db, "logs") == 240


def test_leftover_tmp_and_uncommitted_truncated_day_file_are_redone(home: Path) -> None:
    layout = build(home)
    before = census(layout)
    folder = layout.archive / "logs"
    folder.mkdir(parents=True)
    day0 = day_str(FIRST)
    # an earlier crash: half a .tmp, and a cut-off day file whose rows are still in logs.db
    (folder / f"{day0}.jsonl.tmp").write_text('{"id": 1, "source": "sys')
    (folder / f"{day_str(FIRST + 1)}.jsonl").write_text('{"id": 25, "source": "reflex", "ty')
    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)
    assert report.ok, report.problems
    assert not list(folder.glob("*.tmp"))
    assert len(list(iter_lines(folder / f"{day_str(FIRST + 1)}.jsonl"))) == 24
    assert census(layout) == before
    assert any("left by an interrupted run" in n for n in report.databases[0].notes)


def test_truncated_committed_file_stops_that_database(home: Path) -> None:
    layout = build(home)
    assert archive(home, older_than_s=5 * 86400, now_ms=NOW).ok  # days 0..4
    day_file = layout.archive / "logs" / f"{day_str(FIRST + 4)}.jsonl"
    data = day_file.read_bytes()
    day_file.write_bytes(data[: len(data) // 2])  # lost half its rows; they are gone from logs.db
    rows_before = db_count(layout.logs_db, "logs")

    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)  # days 5, 6 are now due
    assert not report.ok
    (logs,) = [d for d in report.databases if d.label == "logs"]
    assert logs.rows == 0 and db_count(layout.logs_db, "logs") == rows_before
    assert "truncated or edited" in logs.problems[0] and str(day_file) in logs.problems[0]
    assert meta(layout.logs_db, "archived_up_to") == day_str(FIRST + 4)
    (cpu,) = [d for d in report.databases if d.label == "sense cpu"]
    assert not cpu.problems
    assert cpu.rows == 2 * 2 * 6  # the sense db went ahead

    (layout.home / "nerve.yaml").write_text("")
    result = CliRunner().invoke(app, ["archive", "--older-than", "3d"])
    assert result.exit_code == 1
    assert "truncated or edited" in result.output


def test_missing_committed_file_is_reported(home: Path) -> None:
    layout = build(home)
    archive(home, older_than_s=5 * 86400, now_ms=NOW)
    (layout.archive / "senses" / "cpu" / f"{day_str(FIRST)}.jsonl").unlink()
    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)
    (cpu,) = [d for d in report.databases if d.label == "sense cpu"]
    assert cpu.rows == 0 and "is missing" in cpu.problems[0]


def test_watermark_ahead_of_the_data_deletes_nothing_until_repair(home: Path) -> None:
    layout = build(home)
    before = census(layout)
    conn = sqlite3.connect(layout.logs_db)
    conn.execute("INSERT INTO meta VALUES ('archived_up_to', ?)", (day_str(FIRST + 3),))
    conn.commit()
    conn.close()

    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)
    (logs,) = [d for d in report.databases if d.label == "logs"]
    assert logs.rows == 0 and db_count(layout.logs_db, "logs") == 240
    assert "96 rows are older" in logs.problems[0] and "--repair" in logs.problems[0]
    assert not (layout.archive / "logs").exists() or not list((layout.archive / "logs").glob("*.jsonl"))

    report = archive(home, older_than_s=DAYS_3, now_ms=NOW, repair=True)
    assert report.ok, report.problems
    (logs,) = [d for d in report.databases if d.label == "logs"]
    assert logs.files[:4] == [f"{day_str(FIRST + d)}.2.jsonl" for d in range(4)]
    assert f"{day_str(FIRST + 4)}.jsonl" in logs.files
    assert census(layout) == before


def test_cli_dry_run_and_default_from_config(home: Path) -> None:
    layout = build(home)
    (home / "nerve.yaml").write_text("engine:\n  archive_after: 3d\n")
    result = CliRunner().invoke(app, ["archive", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    assert data["dry_run"] is True and data["databases"][0]["planned_rows"] > 0
    assert db_count(layout.logs_db, "logs") == 240  # real time: the 2024 rows are all due, none moved
    result = CliRunner().invoke(app, ["archive"])
    assert result.exit_code == 0, result.output
    assert "rows moved" in result.output and db_count(layout.logs_db, "logs") == 0
    result = CliRunner().invoke(app, ["archive", "--older-than", "soon"])
    assert result.exit_code == 2


def test_unreadable_sense_db_is_reported_and_others_archived(home: Path) -> None:
    layout = build(home)
    layout.sense_db("broken").write_bytes(b"this is not an sqlite database" * 100)
    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)
    by = {d.label: d for d in report.databases}
    assert "cannot read" in by["sense broken"].problems[0]
    assert by["logs"].rows == 7 * 24 and by["sense cpu"].rows == 7 * 12
    dry = {d.label: d for d in archive(home, older_than_s=DAYS_3, now_ms=NOW, dry_run=True).databases}
    assert dry["sense broken"].problems and not dry["sense cpu"].problems


def test_a_watermark_that_is_not_a_date_is_reported(home: Path) -> None:
    layout = build(home)
    conn = sqlite3.connect(layout.logs_db)
    conn.execute("INSERT INTO meta VALUES ('archived_up_to', 'last tuesday')")
    conn.commit()
    conn.close()
    report = archive(home, older_than_s=DAYS_3, now_ms=NOW)
    (logs,) = [d for d in report.databases if d.label == "logs"]
    assert "is not a date" in logs.problems[0] and logs.rows == 0
    assert db_count(layout.logs_db, "logs") == 240
