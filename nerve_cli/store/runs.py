"""A thread as logs.db records it, read back by the kernel (recovery, admission) and the CLI.

- `queued_request`: what the run was queued with (prompt, max_rounds, origin).
- `persisted_chain`: its chain from its `message` rows, ordered by seq.
- `run_counts`: threads per workflow and status, from workflow_runs.

Every read opens its own read-only connection, so it works while an engine writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import WorkflowMessage
from nerve_cli.store.logs import open_readonly, query_logs

MESSAGE_FIELDS = ("role", "content", "meta", "timestamp")


def queued_request(logs_path: Path, run_id: str) -> dict[str, Any]:
    """The payload of the run's `queued` row: prompt, max_rounds, origin ({} if none)."""
    rows = query_logs(logs_path, source="workflow", type="queued", ref=run_id, limit=1)
    return (rows[0]["payload"] or {}) if rows else {}


def run_counts(logs_path: Path) -> dict[str, dict[str, int]]:
    """workflow → status → number of threads, from workflow_runs."""
    if not Path(logs_path).exists():
        return {}
    conn = open_readonly(logs_path)
    try:
        rows = conn.execute("SELECT workflow, status, COUNT(*) FROM workflow_runs GROUP BY workflow, status")
        out: dict[str, dict[str, int]] = {}
        for workflow, status, count in rows:
            out.setdefault(workflow, {})[status] = count
        return out
    finally:
        conn.close()


def persisted_chain(logs_path: Path, run_id: str) -> list[WorkflowMessage]:
    """The thread's messages as persisted, seq 0..n; ValueError when a row is not a valid message.

    A duplicated seq keeps its first row; the chain stops at the first gap.
    """
    by_seq: dict[int, Any] = {}
    for row in query_logs(logs_path, source="workflow", type="message", ref=run_id):
        payload = row["payload"] or {}
        seq = payload.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq not in by_seq:
            by_seq[seq] = {k: payload.get(k) for k in MESSAGE_FIELDS}
    chain: list[WorkflowMessage] = []
    while len(chain) in by_seq:
        try:
            chain.append(WorkflowMessage.from_dict(by_seq[len(chain)]))
        except ValueError as exc:
            raise ValueError(f"{run_id} message seq {len(chain)}: {exc}") from None
    return chain
