"""The Log as a compute may read it: `trigger.log`, read-only, archived days on request.

The same filters as `nerve logs` (source, type, ref, since, limit), over the
same reader: hot rows from data/logs.db through a `mode=ro` + `query_only`
connection, plus the archived JSONL days that `since` reaches. There is no
method that writes, and the connection could not if one tried. Reading the
Log never triggers anything: a log row is data, not a signal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.contract.times import parse_instant
from nerve_cli.home import Layout
from nerve_cli.store.logs import now_ms, workflow_runs

DEFAULT_LIMIT = 100


class LogReader:
    """Read-only access to logs.db (and its archive) for sense code."""

    def __init__(self, home: Path) -> None:
        self.layout = Layout(Path(home))

    def __repr__(self) -> str:
        return f"<LogReader {self.layout.logs_db} read-only>"

    def query(self, *, source: str | None = None, type: str | None = None, ref: str | None = None,
              since: str | int | None = None, limit: int | None = DEFAULT_LIMIT) -> list[dict[str, Any]]:
        """Log rows matching every given filter, newest last (`limit` keeps the newest; None for all).

        `since` is what `nerve logs --since` takes (`90s`, `2h`, `7d`, a UTC
        date `2026-08-01`) or unix ms; archived days are read when it reaches
        them. Rows: {"id", "source", "type", "ref_id", "payload", "ts", "time"}.
        """
        # store.history loads the config model (pydantic, ≈ 11 MiB in a worker): only a compute that reads
        # the Log pays for it
        from nerve_cli.store.history import read_logs

        return read_logs(self.layout.home, source=source, type=type, ref=ref,
                         since_ms=self._since_ms(since), limit=limit).rows

    def runs(self, *, status: str | None = None, workflow: str | None = None) -> list[dict[str, Any]]:
        """Workflow threads (`workflow_runs`): {"run_id", "workflow", "status", "ts", "time"}, in run order."""
        return workflow_runs(self.layout.logs_db, status=status, workflow=workflow)

    def thread(self, run_id: str, *, since: str | int | None = None) -> list[dict[str, Any]]:
        """Every log row of one thread (`ref_id = run_id`), oldest first."""
        return self.query(ref=run_id, since=since, limit=None)

    @staticmethod
    def _since_ms(since: str | int | None) -> int | None:
        """`since` as `nerve logs --since` reads it (a date or a time without a zone is UTC here), or unix ms."""
        if since is None or isinstance(since, int):
            return since
        return parse_instant(since, now_ms=now_ms(), utc=True)
