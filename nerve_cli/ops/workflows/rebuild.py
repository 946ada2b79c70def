"""Derived workflow state, recomputed from the logs (the source of truth).

- `rebuild_runs`: what workflow_runs should hold: the last status-type log row
  of each run (archived days first, then logs.db).
- `compare_runs` / `rewrite_runs`: what `nerve doctor [--fix]` shows and does.
- `unknown_kinds`: rows of logs.db whose (source, type) is no kind of the log's vocabulary
  (`vocab.logrows.LogKind`): written by another version of Nerve, or by hand.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.ops.client import engine_running
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import STATUSES, iter_logs, open_db, open_readonly
from nerve_cli.store.sqlitefile import database_problem
from nerve_cli.vocab.logrows import LogKind


@dataclass(frozen=True)
class RunState:
    run_id: str
    workflow: str
    status: str
    ts: int


def _archived_rows(archive_dir: Path) -> Iterator[dict]:
    """Workflow status rows from data/archive/logs/YYYY-MM-DD.jsonl, oldest day first."""
    if not archive_dir.is_dir():
        return
    for path in sorted(archive_dir.glob("*.jsonl")):
        with path.open("rb") as fh:
            for line in fh:
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(row, dict) and row.get("source") == "workflow" and row.get("type") in STATUSES:
                    yield row


def _db_rows(logs_path: Path) -> Iterator[dict]:
    if not logs_path.exists():
        return
    conn = open_readonly(logs_path)
    try:
        marks = ",".join("?" * len(STATUSES))
        yield from iter_logs(conn, f" WHERE source = 'workflow' AND type IN ({marks})", tuple(sorted(STATUSES)))
    finally:
        conn.close()


def rebuild_runs(logs_path: Path, archive_dir: Path | None = None) -> dict[str, RunState]:
    """run_id → state from the last status row of each run, in log order."""
    runs: dict[str, RunState] = {}
    rows = list(_archived_rows(archive_dir)) if archive_dir else []
    seen_ids = {r.get("id") for r in rows}
    for row in [*rows, *(r for r in _db_rows(logs_path) if r["id"] not in seen_ids)]:
        run_id = row.get("ref_id")
        if not isinstance(run_id, str):
            continue
        payload: dict = row["payload"] if isinstance(row.get("payload"), dict) else {}
        previous = runs.get(run_id)
        workflow = payload.get("workflow") or (previous.workflow if previous else "?")
        runs[run_id] = RunState(run_id, str(workflow), str(row["type"]), int(row["ts"]))
    return runs


def current_runs(logs_path: Path) -> dict[str, RunState]:
    if not logs_path.exists():
        return {}
    conn = open_readonly(logs_path)
    try:
        rows = conn.execute("SELECT run_id, workflow, status, ts FROM workflow_runs").fetchall()
    finally:
        conn.close()
    return {r[0]: RunState(*r) for r in rows}


@dataclass(frozen=True)
class Difference:
    run_id: str
    field: str  # "missing" (not in workflow_runs), "extra" (no logs), "workflow", "status", "ts"
    table: Any  # what workflow_runs says
    logs: Any  # what the logs say


def compare_runs(table: dict[str, RunState], logs: dict[str, RunState]) -> list[Difference]:
    out: list[Difference] = []
    for run_id in sorted(set(table) | set(logs), key=_run_key):
        have, want = table.get(run_id), logs.get(run_id)
        if have is None and want is not None:
            out.append(Difference(run_id, "missing", None, want.status))
        elif want is None and have is not None:
            out.append(Difference(run_id, "extra", have.status, None))
        elif have is not None and want is not None:
            for name in ("workflow", "status", "ts"):
                if getattr(have, name) != getattr(want, name):
                    out.append(Difference(run_id, name, getattr(have, name), getattr(want, name)))
    return out


def rewrite_runs(logs_path: Path, runs: dict[str, RunState]) -> None:
    """Replace workflow_runs with `runs` in one transaction (only with no engine running)."""
    conn = open_db(logs_path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM workflow_runs")
            conn.executemany(
                "INSERT INTO workflow_runs (run_id, workflow, status, ts) VALUES (?, ?, ?, ?)",
                [(r.run_id, r.workflow, r.status, r.ts) for r in runs.values()],
            )
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def _run_key(run_id: str) -> tuple[int, str]:
    number = run_id[4:] if run_id.startswith("run-") else ""
    return (int(number) if number.isdigit() else 0, run_id)


@dataclass(frozen=True)
class UnknownKind:
    source: str
    type: str
    rows: int


def unknown_kinds(logs_path: Path) -> list[UnknownKind]:
    """(source, type) pairs of logs.db that no LogKind names, with how many rows each (one GROUP BY on the
    (source, type) index)."""
    if not logs_path.exists():
        return []
    known = {(k.source.value, k.type) for k in LogKind}
    conn = open_readonly(logs_path)
    try:
        counts = conn.execute("SELECT source, type, count(*) FROM logs GROUP BY source, type").fetchall()
    finally:
        conn.close()
    return [UnknownKind(str(s), str(t), n) for s, t, n in counts if (s, t) not in known]


def damaged_databases(layout: Layout) -> list[tuple[str, str]]:
    """Every database under data/ that is not sound (read-only: SQLite's quick_check), as (path in data/, why)."""
    found = []
    for path in sorted(layout.data.rglob("*.db")) if layout.data.is_dir() else []:
        if "archive" in path.relative_to(layout.data).parts:
            continue
        problem = database_problem(path)
        if problem is not None:
            found.append((str(path.relative_to(layout.data)), problem))
    return found


@dataclass(frozen=True)
class DoctorReport:
    runs: int  # runs the logs know
    differences: list[Difference]
    fixed: bool
    unknown: list[UnknownKind] = field(default_factory=list)  # log rows of kinds outside the vocabulary
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (database under data/, what is wrong with it)


def doctor(home: Path, fix: bool = False) -> DoctorReport:
    """Compare workflow_runs with the logs; with `fix`, rewrite it (refused while an engine runs)."""
    layout = Layout(Path(home))
    rebuilt = rebuild_runs(layout.logs_db, layout.archive / "logs")
    differences = compare_runs(current_runs(layout.logs_db), rebuilt)
    unknown = unknown_kinds(layout.logs_db)
    damaged = damaged_databases(layout)
    if not fix or not differences:
        return DoctorReport(len(rebuilt), differences, False, unknown, damaged)
    if engine_running(layout.home):
        raise NerveError("an engine is running for this instance; stop it before `nerve doctor --fix` "
                         "(the engine is the only writer of data/logs.db)")
    with InstanceLock(layout.home, "nerve doctor --fix"):
        rebuilt = rebuild_runs(layout.logs_db, layout.archive / "logs")  # again, under the lock
        rewrite_runs(layout.logs_db, rebuilt)
    return DoctorReport(len(rebuilt), differences, True, unknown, damaged)
