"""kill -9 the archiver at every checkpoint of a multi-day archive; after resuming, every row exists once.

The archiver process is a real child; NERVE_ARCHIVE_CRASH_AT=N makes it send
itself SIGKILL at its Nth checkpoint (after export, before commit, after
commit, after rename, around VACUUM), for every N until a run gets through.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from archive_data import add_thread, census, day_ms, make_logs, make_sense, meta
from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.logs import LogStore

FIRST = 20_000
DAYS = 6
ARCHIVER = (
    "import sys; from pathlib import Path; from nerve_cli.store.archive import archive; "
    "r = archive(Path(sys.argv[1]), older_than_s=86400, now_ms=int(sys.argv[2])); "
    "sys.exit(0 if r.ok else 3)"
)


def run_archiver(home: Path, now: int, crash_at: int | None) -> int:
    env = dict(os.environ)
    env.pop("NERVE_ARCHIVE_CRASH_AT", None)
    if crash_at:
        env["NERVE_ARCHIVE_CRASH_AT"] = str(crash_at)
    proc = subprocess.run([sys.executable, "-c", ARCHIVER, str(home), str(now)], env=env, timeout=60)
    return proc.returncode


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


def test_kill_9_at_every_checkpoint_then_resume(template: Path, tmp_path: Path) -> None:
    expected = census(Layout(template))
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    assert run_archiver(reference, now_at(DAYS + 1), None) == 0
    ref_files = sorted(str(p.relative_to(reference)) for p in (reference / "data" / "archive").rglob("*.jsonl"))
    assert any(".2.jsonl" in f for f in ref_files)  # the late thread rows go to part files

    killed = 0
    for n in range(1, 200):
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
    # 3 dbs × 4 new days × 4 points + 2 late days × 4 + VACUUM points
    assert killed >= 50


def test_repeated_crashes_still_converge(template: Path, home: Path) -> None:
    shutil.copytree(template, home)
    expected = census(Layout(home))
    for attempt in range(100):
        rc = run_archiver(home, now_at(DAYS + 1), crash_at=3)
        if rc == 0:
            break
        assert rc == -signal.SIGKILL
    else:
        pytest.fail("never finished")
    assert attempt > 5  # it really was interrupted many times
    exactly_once(Layout(home), expected)
