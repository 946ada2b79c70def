"""The agents' documents: a delivery (`nerve agent wait|next --json`, MCP `wait_for_events`), an acknowledgement
(`nerve agent ack --json`, MCP `ack_events`), the agents with their backlogs (`nerve agent list --json`) and what
`nerve agent install` wrote."""

from __future__ import annotations

from typing import Any, Iterable

from nerve_cli.contract import VERSION
from nerve_cli.contract.times import stamp


def delivery(agent: str, found: Any, acked: Iterable[int] = (), timed_out: bool = False) -> dict[str, Any]:
    """One take: the delivery handed (a store.inbox.Delivery; None when nothing was), and what the call
    acknowledged first."""
    events = [] if found is None else [
        {"source": e.source, "kind": e.kind, "id": e.id, **stamp("stored", e.ts), "payload": e.payload,
         "schema_version": e.schema_version, "hash": e.hash} for e in found.events]
    return {"version": VERSION, "agent": agent, "delivery": None if found is None else found.id,
            "handed": 0 if found is None else found.handed,
            "redelivered": False if found is None else found.redelivered,
            **stamp("created", None if found is None else found.created_ms),
            "timed_out": timed_out, "more": False if found is None else found.more,
            "acked": sorted(acked), "events": events}


def ack(agent: str, acked: Iterable[int], already: Iterable[int] = (), unknown: Iterable[int] = ()) -> dict[str, Any]:
    return {"version": VERSION, "agent": agent, "acked": sorted(acked), "already": sorted(already),
            "unknown": sorted(unknown)}


def agent_row(name: str, sources: Iterable[str], enabled: bool, deliver: str, found: Any) -> dict[str, Any]:
    """`found`: the agent's store.inbox.AgentBacklog."""
    return {"name": name, "sources": list(sources), "enabled": enabled, "deliver": deliver,
            "backlog": found.events, "queued": found.queued, "pending": found.pending, "unheard": found.unheard,
            "deliveries_pending": found.deliveries, "deliveries_acked": found.acked,
            **stamp("oldest", found.oldest_ts), **stamp("last_ack", found.last_ack_ms)}


def agent_list(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": VERSION, "agents": rows}


def install(harness: str, agent: str, project: str, dry_run: bool, files: list[dict[str, Any]],
            notes: list[str]) -> dict[str, Any]:
    """`files`: [{path, action: created | updated | unchanged, content}] (content: the whole file as written)."""
    return {"version": VERSION, "harness": harness, "agent": agent, "project": project, "dry_run": dry_run,
            "files": files, "notes": notes}
