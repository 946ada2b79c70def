"""Cold archive over generated history: per-day files, watermark, idempotence, VACUUM, live threads, dry run."""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from archive_data import add_thread, census, day_ms, db_count, make_logs, make_sense, meta

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.jsonl import iter_lines
from nerve_cli.store.logs import LogStore, workflow_runs

FIRST = 20_000  # 2024-10-04
LOGS_PER_DAY, SENSE_PER_DAY = 60, 20


def build(home: Path, days: int = 100) -> Layout:
    layout = Layout(home)
    make_logs(layout, FIRST, days, LOGS_PER_DAY)
    make_sense(layout, "cpu", FIRST, days, SENSE_PER_DAY)
    return layout


def now_after(days: int) -> int:
    return day_ms(FIRST + days) + 12 * 3_600_000  # noon of the day after the data


@pytest.fixture(scope="module")
def hundred_days(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("template") / "home"
    build(home)
    return home


def copy_of(template: Path, home: Path) -> Layout:
    shutil.copytree(template, home)
    return Layout(home)


def lines_per_day(folder: Path) -> dict[str, Counter]:
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        out[path.name] = Counter(line.get("table", "logs") for line in iter_lines(path))
    return out


def test_hundred_days_moved_per_day_with_watermark(hundred_days: Path, home: Path) -> None:
    layout = copy_of(hundred_days, home)
    before = census(layout)
    report = archive(home, older_than_s=10 * 86400, now_ms=now_after(100))
    assert report.ok, report.problems
    # cut-off is noon of day 100-10 → days FIRST .. FIRST+89 are whole and older
    archived = [day_str(FIRST + d) for d in range(90)]
    logs_files = lines_per_day(layout.archive / "logs")
    assert list(logs_files) == [f"{d}.jsonl" for d in archived]
    assert all(c == Counter({"logs": LOGS_PER_DAY}) for c in logs_files.values())
    sense_files = lines_per_day(layout.archive / "senses" / "cpu")
    assert list(sense_files) == [f"{d}.jsonl" for d in archived]
    assert all(c == Counter({"_signals": SENSE_PER_DAY, "sample": SENSE_PER_DAY}) for c in sense_files.values())

    assert meta(layout.logs_db, "archived_up_to") == archived[-1]
    assert meta(layout.sense_db("cpu"), "archived_up_to", "_nerve_meta") == archived[-1]
    assert db_count(layout.logs_db, "logs") == 10 * LOGS_PER_DAY
    assert db_count(layout.sense_db("cpu"), "_signals") == 10 * SENSE_PER_DAY
    assert db_count(layout.sense_db("cpu"), "sample") == 10 * SENSE_PER_DAY
    assert db_count(layout.sense_db("cpu"), "config") == 1  # not time-marked: never archived
    assert census(layout) == before  # every row exactly once, content unchanged
    by_db = {d.label: d for d in report.databases}
    assert by_db["logs"].rows == 90 * LOGS_PER_DAY
    assert by_db["sense cpu"].rows == 90 * 2 * SENSE_PER_DAY


def test_second_run_is_a_no_op(hundred_days: Path, home: Path) -> None:
    layout = copy_of(hundred_days, home)
    archive(home, older_than_s=10 * 86400, now_ms=now_after(100))
    stamps = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in layout.archive.rglob("*.jsonl")}
    again = archive(home, older_than_s=10 * 86400, now_ms=now_after(100))
    assert again.ok and again.rows == 0
    assert all(d.days == [] and d.files == [] for d in again.databases)
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in layout.archive.rglob("*.jsonl")} == stamps


def test_vacuum_shrinks_the_files(hundred_days: Path, tmp_path: Path) -> None:
    sizes = {}
    for vacuum in (True, False):
        layout = copy_of(hundred_days, tmp_path / f"v{vacuum}")
        start = layout.logs_db.stat().st_size
        report = archive(layout.home, older_than_s=10 * 86400, now_ms=now_after(100), vacuum=vacuum)
        sizes[vacuum] = (start, layout.logs_db.stat().st_size, report)
    start, vacuumed, report = sizes[True]
    assert vacuumed < start / 3
    assert report.databases[0].bytes_freed > 0
    start, kept, _ = sizes[False]
    assert kept >= start  # without VACUUM the file keeps its pages


def test_next_day_archives_only_the_new_day(hundred_days: Path, home: Path) -> None:
    layout = copy_of(hundred_days, home)
    archive(home, older_than_s=10 * 86400, now_ms=now_after(100))
    report = archive(home, older_than_s=10 * 86400, now_ms=now_after(101))
    assert [d.days for d in report.databases] == [[day_str(FIRST + 90)]] * 2
    assert meta(layout.logs_db, "archived_up_to") == day_str(FIRST + 90)


def test_dry_run_changes_nothing(hundred_days: Path, home: Path) -> None:
    layout = copy_of(hundred_days, home)
    report = archive(home, older_than_s=10 * 86400, now_ms=now_after(100), dry_run=True)
    assert [d.planned_rows for d in report.databases] == [90 * LOGS_PER_DAY, 90 * 2 * SENSE_PER_DAY]
    assert len(report.databases[0].planned_days) == 90
    assert not layout.archive.exists()
    assert db_count(layout.logs_db, "logs") == 100 * LOGS_PER_DAY
    assert meta(layout.logs_db, "archived_up_to") is None


def test_live_thread_rows_stay_until_the_thread_ends(home: Path) -> None:
    layout = build(home, days=10)
    live = [day_ms(FIRST + 1) + 5, day_ms(FIRST + 2) + 5, day_ms(FIRST + 9) + 5]
    add_thread(layout, "run-1", "started", live)
    add_thread(layout, "run-2", "completed", [day_ms(FIRST + 1) + 9])
    before = census(layout)
    runs = workflow_runs(layout.logs_db)

    archive(home, older_than_s=3 * 86400, now_ms=now_after(10))
    conn = sqlite3.connect(layout.logs_db)
    kept = conn.execute("SELECT ref_id, ts FROM logs WHERE ts < ? ORDER BY id", (day_ms(FIRST + 7),)).fetchall()
    assert kept == [("run-1", live[0]), ("run-1", live[1])]  # only the live thread's old rows stayed
    assert census(layout) == before
    assert workflow_runs(layout.logs_db) == runs

    # the thread ends; the next run moves its held rows into part files of their own days
    store = LogStore(layout.logs_db)
    store.workflow_event("run-1", "review", "completed", ts=now_after(10))
    store.close()
    before = census(layout)
    report = archive(home, older_than_s=3 * 86400, now_ms=now_after(10))
    assert report.databases[0].files == [f"{day_str(FIRST + 1)}.2.jsonl", f"{day_str(FIRST + 2)}.2.jsonl"]
    assert census(layout) == before
    assert conn.execute("SELECT COUNT(*) FROM logs WHERE ts < ?", (day_ms(FIRST + 7),)).fetchone()[0] == 0
    assert [r["status"] for r in workflow_runs(layout.logs_db)] == ["completed", "completed"]
    # the day files written earlier were not rewritten
    first = list(iter_lines(layout.archive / "logs" / f"{day_str(FIRST + 1)}.jsonl"))
    assert all(r["ref_id"] != "run-1" for r in first)
    conn.close()


def test_concurrent_writer_loses_nothing(hundred_days: Path, home: Path) -> None:
    """The kernel's LogStore keeps appending now-rows while the archive deletes old days."""
    import subprocess
    import sys

    layout = copy_of(hundred_days, home)
    before = census(layout)["logs"]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(layout.logs_db), str(now_after(100))],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "writing"
        report = archive(home, older_than_s=10 * 86400, now_ms=now_after(100))
    finally:
        writer.stdin = None
        (layout.home / "stop").write_text("")
        out, _ = writer.communicate(timeout=30)
    written = int(out.strip())
    assert report.ok and written > 0
    after = census(layout)["logs"]
    assert all(v == 1 for v in after.values())
    new = [k for k in after if k not in before]
    assert len(new) == written and set(before) <= set(after)


WRITER = """
import sys, time
from pathlib import Path
from nerve_cli.store.logs import LogStore
db, now = Path(sys.argv[1]), int(sys.argv[2])
store = LogStore(db)
n = 0
print("writing", flush=True)
while not (db.parent.parent / "stop").exists():
    for _ in range(20):
        store.append("system", "tick", None, {"n": n}, ts=now + n)
        n += 1
    store.flush()
    time.sleep(0.005)
store.close()
print(n)
"""


def test_an_age_reaching_before_1970_archives_nothing(hundred_days: Path, home: Path) -> None:
    layout = copy_of(hundred_days, home)
    for dry_run in (True, False):
        report = archive(home, older_than_s=100_000_000 * 86400, now_ms=now_after(100), dry_run=dry_run)
        assert report.up_to == "1969-12-31" and report.rows == 0, report
    assert db_count(layout.logs_db, "logs") == 100 * LOGS_PER_DAY
