"""The `fleet` document (`nerve fleet --json`): this host's link and outbox, and the hosts it has heard from."""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.contract.engine import fleet as live_fleet
from nerve_cli.contract.times import stamp


def fleet_document(view: dict[str, Any]) -> dict[str, Any]:
    """`ops.fleet.fleet_view`'s answer → the document. Link fields are null when no engine runs."""
    live = live_fleet(view["live"]) if view.get("live") else None
    outbox = view["outbox"]
    waiting = live["outbox"] if live is not None else sum(o["waiting"] for o in outbox.values())
    sent = [o["sent_ts"] for o in outbox.values() if o.get("sent_ts")]
    live_subs = {s["source"]: s for s in (live or {}).get("subscriptions") or []}
    return {
        "version": VERSION, "host": view["host"], "enabled": view["enabled"], "servers": view["servers"],
        "stream": view["stream"], "engine_running": view.get("live") is not None,
        "connected": live["connected"] if live is not None else None,
        "server": live["server"] if live is not None else None,
        **({k: live[k] for k in ("since_ms", "since", "last_error")} if live is not None
           else {"since_ms": None, "since": None, "last_error": None}),
        "outbox": waiting, **stamp("last_sent", max(sent) if sent else None),
        "publishes": [{"kind": kind, "name": name, "sent_id": o["sent_id"], "waiting": o["waiting"]}
                      for (kind, name), o in sorted(outbox.items())],
        "subscriptions": [_subscription(source, subject, live_subs.get(source))
                          for source, subject in sorted(view["subscriptions"].items())],
        "hosts": [{"host": host, "events": h["events"], "source": h["last_channel"], **stamp("last_event", h["last_ts"])}
                  for host, h in sorted(view["received"].items())],
    }


def _subscription(source: str, subject: str, live: dict[str, Any] | None) -> dict[str, Any]:
    return {"source": source, "subject": subject,
            "received": live["received"] if live else None, "duplicates": live["duplicates"] if live else None,
            "lag": live["lag"] if live else None}
