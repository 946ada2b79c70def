"""`nerve fleet`: this host in its fleet, and the hosts it has heard from."""

import time

from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption, UtcOption


def fleet(home: HomeOption = None, json_: JsonOption = False, format_: FormatOption = None,
          _utc: UtcOption = False) -> None:
    """Show this host in its fleet: the link to NATS, the outbox, and every host heard from with its last event.

    Works with the engine stopped too (read from data/, without the link's state).
    Exit code 0, or 1 when nerve.yaml has no fleet: section.

    Example: nerve fleet --json
    """
    from nerve_cli.cli import output
    from nerve_cli.contract.fleet import fleet_document
    from nerve_cli.contract.times import ago
    from nerve_cli.home import require_instance
    from nerve_cli.ops.fleet import fleet_view

    fmt = output.use_format(format_, json_)
    doc = fleet_document(fleet_view(require_instance(home)))
    if fmt == "json":
        output.print_json(doc)
        return
    now = time.time_ns() // 1_000_000
    if not doc["engine_running"]:
        link = "engine stopped (read from the files)"
    elif doc["connected"]:
        link = f"connected to {doc['server']} since {ago(doc['since_ms'], now)}"
    else:
        link = f"disconnected since {ago(doc['since_ms'], now)}: {doc['last_error']}"
    last_sent = f"; last sent {output.when(doc['last_sent_ms'])}" if doc["last_sent_ms"] else ""
    output.info(f"host {doc['host']} · {link} · outbox {doc['outbox']}{last_sent}", style="bold")
    rows = [(h["host"], output.when(h["last_event_ms"]), h["source"], h["events"]) for h in doc["hosts"]]
    output.show(output.table("Hosts heard from", ["host", "last event", "source", "events"], rows))
    if doc["subscriptions"]:
        subs = [(s["source"], s["subject"], "-" if s["received"] is None else s["received"],
                 "-" if s["lag"] is None else s["lag"]) for s in doc["subscriptions"]]
        output.show(output.table("Subscriptions", ["source", "subject", "received", "lag"], subs))
