"""The `logs` document: one per log row (`nerve logs --json` prints them as JSON lines)."""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.contract.times import stamp


def log_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored log row (`store.logs.log_row`, live or archived) → the `log` document.

    A signal shown by `nerve logs --signals` (read from its sense's database, not logs.db)
    has `id` null and its own `signal_id`; a log row has `signal_id` null."""
    return {"version": VERSION, "id": row["id"], "signal_id": row.get("signal_id"), "source": row["source"],
            "type": row["type"], "ref_id": row["ref_id"], "payload": row["payload"], **stamp("time", row["ts"])}
