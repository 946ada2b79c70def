"""What `nerve fleet` shows: this host in its fleet, and the hosts it has heard from.

With the engine running, the link's state, the outbox and each subscription's
lag come from it; the hosts and their last events are read from
`data/events.db` (every event received from the fleet and not yet archived,
with the host it came from), so the answer is the same before and after a
restart. With no engine, everything is read from the files, read-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.config.fleet import subscriptions
from nerve_cli.config.load import load_config
from nerve_cli.errors import EngineNotRunning, NerveError
from nerve_cli.home import Layout
from nerve_cli.ops.client import request
from nerve_cli.store.events import received_by_host
from nerve_cli.store.fleet import outbox_from_files


def fleet_view(home: Path) -> dict[str, Any]:
    """The answer the `fleet` document is built from (contract.fleet.fleet_document)."""
    config = load_config(home)
    fleet = config.fleet
    if fleet is None:
        raise NerveError("nerve.yaml has no `fleet:` section, so this instance is not in a fleet; add one "
                         "(servers, publish, subscribe: see docs/guides/fleet.md)")
    layout = Layout(home)
    try:
        live = request(home, "status").get("fleet")
    except EngineNotRunning:
        live = None
    sources = [("sense", s) for s in fleet.publish.senses] + [("channel", c) for c in fleet.publish.channels]
    outbox = outbox_from_files(layout.data, sources)
    return {"host": fleet.host_name, "enabled": fleet.enabled, "servers": list(fleet.servers),
            "stream": fleet.stream, "live": live, "outbox": outbox,
            "subscriptions": subscriptions(fleet), "received": received_by_host(layout.events_db)}
