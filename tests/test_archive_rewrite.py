"""When most of logs.db leaves, the archive rewrites the table from the rows that stay, crash-safe like a day."""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

import pytest
from archive_data import add_thread, census, day_ms, make_logs, meta, run_archiver

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.archive_db import ArchiveDb
from nerve_cli.store.logs import LogStore

FIRST = 20_000
DAYS = 10


def now_after(days: int) -> int:
    return day_ms(FIRST + days) + 3_600_000


def build(home: Path) -> Layout:
    """Ten days of logs; a live thread with rows on days 1 and 8 and an ended one on day 2."""
    layout = Layout(home)
    make_logs(layout, FIRST, DAYS, 40)
    add_thread(layout, "run-live", "started", [day_ms(FIRST + 1) + 5, day_ms(FIRST + 8) + 5])
    add_thread(layout, "run-done", "completed", [day_ms(FIRST + 2) + 9])
    return layout


def snapshot(db: Path) -> dict:
    conn = sqlite3.connect(db)
    try:
        return {
            "schema": conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
            "sequence": conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'logs'").fetchone()[0],
            "rows": conn.execute("SELECT * FROM logs ORDER BY id").fetchall(),
            "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
        }
    finally:
        conn.close()


@pytest.fixture()
def rewrites(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each rewrite of the logs table deleted."""
    calls: list[int] = []
    real = ArchiveDb.delete_by_rewrite

    def spy(self: ArchiveDb, lo: int, hi: int, extra: str) -> int:
        calls.append(real(self, lo, hi, extra))
        return calls[-1]

    monkeypatch.setattr(ArchiveDb, "delete_by_rewrite", spy)
    return calls


def test_most_rows_leaving_rewrite_the_table_and_what_stays_is_untouched(home: Path, rewrites: list[int]) -> None:
    layout = build(home)
    before, counted = snapshot(layout.logs_db), census(layout)
    report = archive(home, older_than_s=3 * 86400, now_ms=now_after(DAYS))  # days 0..6 leave, 7..9 stay
    assert report.ok, report.problems
    assert rewrites == [report.rows] and report.rows > 0
    assert report.databases[0].days == [day_str(FIRST + d) for d in range(7)]
    assert meta(layout.logs_db, "archived_up_to") == day_str(FIRST + 6)
    after = snapshot(layout.logs_db)
    assert after["integrity"] == "ok"
    assert after["schema"] == before["schema"]  # same table, indexes and views
    assert after["sequence"] == before["sequence"]
    archived = day_ms(FIRST + 7)
    stayed = [r for r in before["rows"] if r[5] >= archived or r[3] == "run-live"]
    assert after["rows"] == stayed  # every staying row with its own id and content
    assert census(layout) == counted  # and every row exactly once
    store = LogStore(layout.logs_db)
    store.append("system", "tick", None, {}, ts=now_after(DAYS))
    store.close()
    new_id = snapshot(layout.logs_db)["rows"][-1][0]
    assert new_id == before["sequence"] + 1  # ids are never reused


def test_few_rows_leaving_are_deleted_day_by_day(home: Path, rewrites: list[int]) -> None:
    layout = build(home)
    counted = census(layout)
    report = archive(home, older_than_s=8 * 86400, now_ms=now_after(DAYS))  # days 0, 1 leave
    assert report.ok and report.databases[0].days == [day_str(FIRST), day_str(FIRST + 1)]
    assert rewrites == []
    assert census(layout) == counted


def test_kill_9_at_every_checkpoint_of_a_rewrite_then_resume(home: Path, tmp_path: Path) -> None:
    template = build(home)
    expected, kept = census(template), snapshot(template.logs_db)["rows"]
    stays = [r for r in kept if r[5] >= day_ms(FIRST + 7) or r[3] == "run-live"]
    now = now_after(DAYS - 2)  # the archiver's age is one day: days 0..6 leave
    killed = 0
    for n in range(1, 100):
        copy = tmp_path / f"n{n}"
        shutil.copytree(home, copy)
        rc = run_archiver(copy, now, crash_at=n)
        if rc == 0:
            break
        assert rc == -signal.SIGKILL, f"crash point {n}: exit {rc}"
        killed += 1
        assert run_archiver(copy, now) == 0, f"resume after crash point {n} failed"
        layout = Layout(copy)
        assert census(layout) == expected, f"crash point {n}"
        assert not list(layout.archive.rglob("*.tmp"))
        assert snapshot(layout.logs_db)["rows"] == stays, f"crash point {n}"
        assert meta(layout.logs_db, "archived_up_to") == day_str(FIRST + 6)
        shutil.rmtree(copy)
    # exported, deleted, committed, seven renames, VACUUM's two
    assert killed >= 12
