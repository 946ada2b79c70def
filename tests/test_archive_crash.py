"""kill -9 the archiver at every checkpoint of a multi-day archive; after resuming, every row exists once.

The archiver process is a real child (forked from a warm fork server: see
`archive_data.run_archiver`); NERVE_ARCHIVE_CRASH_AT=N makes it send itself
SIGKILL at its Nth checkpoint (after export, before commit, after commit,
after rename, around VACUUM), for every N until a run gets through.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from archive_data import add_thread, census, day_ms, make_logs, make_sense, meta, run_archiver

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.logs import LogStore

FIRST = 20_000
DAYS = 6


def now_at(day: int) -> int:
    return day_ms(FIRST + day) + 3_600_000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Archived once with a live thread held back; then the thread ended and two more days aged."""
    home = tmp_path_factory.mktemp("crash") / "home"
    layout = Layout(home)
    make_logs(layout, FIRST, DAYS, 30)
    make_sense(layout, "cpu", FIRST, DAYS, 8)
    make_sense(layout, "disk", FIRST, DAYS, 5)
    add_thread(layout, "run-1", "started", [day_ms(FIRST) + 5, day_ms(FIRST + 1) + 5])
    assert archive(home, older_than_s=86400, now_ms=now_at(3)).ok  # days 0, 1 (run-1 held back)
    store = LogStore(layout.logs_db)
    store.workflow_event("run-1", "review", "completed", ts=now_at(3))
    store.close()
    return home


def exactly_once(layout: Layout, expected: dict) -> None:
    found = census(layout)
    assert found == expected
    assert all(n == 1 for c in found.values() for n in c.values())
    assert not list(layout.archive.rglob("*.tmp"))


# The crash points are dealt to shards, one test each, which the suite's test processes run side by side:
# each point costs two archiver runs (crash, resume), and all of them in one test were over a minute of
# disk flushes on a loaded machine.
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_kill_9_at_every_checkpoint_then_resume(template: Path, tmp_path: Path, shard: int) -> None:
    expected = census(Layout(template))
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    assert run_archiver(reference, now_at(DAYS + 1), None) == 0
    ref_files = sorted(str(p.relative_to(reference)) for p in (reference / "data" / "archive").rglob("*.jsonl"))
    assert any(".2.jsonl" in f for f in ref_files)  # the late thread rows go to part files

    killed = 0
    for n in range(1 + shard, 200, SHARDS):
        home = tmp_path / f"n{n}"
        shutil.copytree(template, home)
        rc = run_archiver(home, now_at(DAYS + 1), crash_at=n)
        if rc == 0:
            break  # more checkpoints than this run has: every point was tried
        assert rc == -signal.SIGKILL, f"crash point {n}: exit {rc}"
        killed += 1
        assert run_archiver(home, now_at(DAYS + 1), None) == 0, f"resume after crash point {n} failed"
        layout = Layout(home)
        exactly_once(layout, expected)
        files = sorted(str(p.relative_to(home)) for p in layout.archive.rglob("*.jsonl"))
        assert files == ref_files, f"crash point {n}"
        assert meta(layout.logs_db, "archived_up_to") == day_str(FIRST + DAYS - 1)
        shutil.rmtree(home)
    # 3 dbs × 4 new days × 4 points + 2 late days × 4 + VACUUM points, dealt to SHARDS
    assert killed >= 50 // SHARDS


def test_repeated_crashes_still_converge(template: Path, home: Path) -> None:
    shutil.copytree(template, home)
    expected = census(Layout(home))
    for attempt in range(100):  # noqa: B007 (read after the loop)
        rc = run_archiver(home, now_at(DAYS + 1), crash_at=3)
        if rc == 0:
            break
        assert rc == -signal.SIGKILL
    else:
        pytest.fail("never finished")
    assert attempt > 5  # it really was interrupted many times
    exactly_once(Layout(home), expected)
