"""A thread as logs.db records it, read back by the kernel (recovery, admission) and the CLI.

- `queued_request`: what the run was queued with (prompt, max_rounds, origin).
- `persisted_chain`: its chain from its `message` rows, ordered by seq.
- `run_counts`: threads per workflow and status, from workflow_runs.
- `thread_record`: its request and chain, archived days included (to run it again).

Every read opens its own read-only connection, so it works while an engine writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.automaton.model import WorkflowMessage
from nerve_cli.home import Layout
from nerve_cli.store.history import read_logs
from nerve_cli.store.logs import open_readonly, query_logs

MESSAGE_FIELDS = ("role", "content", "meta", "timestamp")


def queued_request(logs_path: Path, run_id: str) -> dict[str, Any]:
    """The payload of the run's `queued` row: prompt, max_rounds, origin ({} if none)."""
    rows = query_logs(logs_path, source="workflow", type="queued", ref=run_id, limit=1)
    payload = rows[0]["payload"] if rows else None
    return payload if isinstance(payload, dict) else {}  # none, or damaged: nothing it was queued with


def waiting_on(logs_path: Path, source: str) -> list[tuple[str, Any]]:
    """(run id, match) of each thread now waiting for an event of `source` (its newest `waiting` row's
    `waiting_for`): one query on the index of the log's thread rows."""
    if not Path(logs_path).exists():
        return []
    conn = open_readonly(logs_path)
    try:
        rows = conn.execute(
            "SELECT r.run_id, json_extract(l.payload, '$.waiting_for.match') FROM workflow_runs r "
            "JOIN logs l ON l.id = (SELECT max(id) FROM logs WHERE source = 'workflow' AND type = 'waiting' "
            "AND ref_id = r.run_id) WHERE r.status = 'waiting' "
            "AND json_extract(l.payload, '$.waiting_for.kind') = 'event' "
            "AND json_extract(l.payload, '$.waiting_for.source') = ? ORDER BY r.run_id", (source,)).fetchall()
    finally:
        conn.close()
    out = []
    for run_id, match in rows:
        try:
            out.append((run_id, orjson.loads(match) if match else {}))
        except orjson.JSONDecodeError:
            continue  # a damaged row: that thread's own reads name it
    return out


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
    return chain_of(query_logs(logs_path, source="workflow", type="message", ref=run_id), run_id)


def chain_of(rows: list[dict[str, Any]], run_id: str) -> list[WorkflowMessage]:
    """The chain in a thread's log rows (its `message` rows, by seq); ValueError for a row that is not one."""
    by_seq: dict[int, Any] = {}
    for row in rows:
        payload = row["payload"] or {}
        if not isinstance(payload, dict):  # a damaged row: the chain cannot be trusted past it
            raise ValueError(f"{run_id} log row {row.get('id')}: its payload is {type(payload).__name__}, not a "
                             "message object")
        seq = payload.get("seq")
        if row["type"] == "message" and isinstance(seq, int) and not isinstance(seq, bool) and seq not in by_seq:
            by_seq[seq] = {k: payload.get(k) for k in MESSAGE_FIELDS}
    chain: list[WorkflowMessage] = []
    while len(chain) in by_seq:
        try:
            chain.append(WorkflowMessage.from_dict(by_seq[len(chain)]))
        except ValueError as exc:
            raise ValueError(f"{run_id} message seq {len(chain)}: {exc}") from None
    return chain


@dataclass(frozen=True)
class ThreadRecord:
    """What a thread was asked to do and what it said: enough to run it again."""

    run_id: str
    workflow: str
    prompt: str
    max_rounds: int
    chain: list[WorkflowMessage]


def thread_record(home: Path, run_id: str) -> ThreadRecord | None:
    """A thread's request and chain, from logs.db or, when its rows were archived, from the archive; None
    when there is no such thread. ValueError when a message row is not a valid message."""
    rows = query_logs(Layout(home).logs_db, source="workflow", ref=run_id)
    if not any(r["type"] == "queued" for r in rows):
        rows = read_logs(home, source="workflow", ref=run_id, since_ms=0).rows
    queued = [r["payload"] if isinstance(r["payload"], dict) else {} for r in rows if r["type"] == "queued"]
    if not queued:
        return None
    chain = chain_of(rows, run_id)
    rounds = chain[0].meta.get("maxRounds") if chain else None
    max_rounds = rounds if isinstance(rounds, int) else int(queued[0].get("max_rounds") or 1)
    workflow = str(queued[0].get("workflow") or next((r["payload"] or {}).get("workflow") for r in rows))
    return ThreadRecord(run_id, workflow, str(queued[0].get("prompt") or ""), max_rounds, chain)
