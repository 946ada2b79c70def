"""The `logs` document: one per log row (`nerve logs --json` prints them as JSON lines)."""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.contract.times import stamp


def log_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored log row (`store.logs.log_row`, live or archived) → the `log` document."""
    return {"version": VERSION, "id": row["id"], "source": row["source"], "type": row["type"],
            "ref_id": row["ref_id"], "payload": row["payload"], **stamp("time", row["ts"])}
