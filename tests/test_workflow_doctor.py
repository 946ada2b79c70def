"""workflow_runs can be rebuilt from the logs; `nerve doctor [--fix]` shows and repairs differences."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from conftest import cli
from workflow_support import PINGPONG, ended, make_instance, manager, wait_for

from nerve_cli.ops.workflows.rebuild import compare_runs, current_runs, rebuild_runs
from nerve_cli.store.logs import open_db, query_logs

LOGS = Path("data") / "logs.db"



def some_history(home: Path) -> None:
    """A real mix of completed, failed, dropped and crashed threads."""
    failing = PINGPONG.replace("def until(messages):", "def until(messages):\n    raise KeyError('x')")
    config = make_instance(home, {"x": PINGPONG, "bad": failing},
                           {"workflows": {"x": {"concurrency": 1, "max_queue": 1}, "bad": {}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        for i in range(3):  # run-1 runs, run-2 queued then dropped by run-3
            mgr.launch("x", f"rounds=2 sleep=0.05 id={i}", None, {})
        mgr.launch("bad", "p", None, {})
        mgr.launch("x", "gate=1", None, {})  # left running: crashed by stop()
        await wait_for(lambda: ended(logs, "run-1", "run-2", "run-3", "run-4"))
        await mgr.stop(0.1)

    asyncio.run(main())


def test_rebuilt_runs_match_what_the_manager_wrote(home: Path) -> None:
    some_history(home)
    table = current_runs(home / LOGS)
    assert {r.status for r in table.values()} == {"completed", "dropped", "failed", "crashed"}
    assert rebuild_runs(home / LOGS) == table
    result = cli("doctor")
    assert result.exit_code == 0 and "workflow_runs matches the logs (5 threads)" in result.output


def test_doctor_reports_then_fixes_every_kind_of_difference(home: Path) -> None:
    some_history(home)
    conn = open_db(home / LOGS)
    conn.execute("UPDATE workflow_runs SET status = 'started' WHERE run_id = 'run-1'")
    conn.execute("DELETE FROM workflow_runs WHERE run_id = 'run-2'")
    conn.execute("INSERT INTO workflow_runs VALUES ('run-99', 'x', 'queued', 1)")
    conn.execute("UPDATE workflow_runs SET workflow = 'y' WHERE run_id = 'run-4'")
    conn.close()
    before = {(d.run_id, d.field) for d in compare_runs(current_runs(home / LOGS), rebuild_runs(home / LOGS))}
    assert before == {("run-1", "status"), ("run-2", "missing"), ("run-99", "extra"), ("run-4", "workflow")}

    report = cli("doctor")
    assert report.exit_code == 1
    for needle in ("run-1", "status", "started", "completed", "run-2", "missing", "run-99", "extra",
                   "doctor --fix"):
        assert needle in report.output
    fixed = cli("doctor", "--fix")
    assert fixed.exit_code == 0 and "rewrote workflow_runs" in fixed.output
    assert current_runs(home / LOGS) == rebuild_runs(home / LOGS)
    assert cli("doctor").exit_code == 0


def test_archived_log_days_still_count(home: Path) -> None:
    some_history(home)
    # move run-1's rows to the archive the way the archiver does (one JSON row per line)
    rows = query_logs(home / LOGS, ref="run-1")
    archive = home / "data" / "archive" / "logs"
    archive.mkdir(parents=True)
    (archive / "2026-01-01.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    conn = open_db(home / LOGS)
    conn.execute("DELETE FROM logs WHERE ref_id = 'run-1'")
    conn.close()
    assert rebuild_runs(home / LOGS, archive)["run-1"].status == "completed"
    assert cli("doctor").exit_code == 0
    assert "run-1" not in rebuild_runs(home / LOGS)  # without the archive it would look like an extra row
