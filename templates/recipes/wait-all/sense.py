"""The {{name}} wait-all router: fire once every source has sent something since the last fire.

Every source in this sense's `on:` list must have signalled (or had an event
emitted) at least once since the previous fire; then it fires once, with the
latest payload of each, and starts waiting again. Until then each arrival is
kept silently (`KEEP`), so a restart loses no one's arrival.
"""

import json

from nerve_cli.sdk import KEEP

from .schema import Arrived


def compute(db, peers, trigger):
    for event in trigger.events:
        db.upsert(Arrived(source=event.source, payload=json.dumps(event.payload), ts=event.ts))
    arrived = {row.source: row for row in db.rows(Arrived)}
    if not trigger.sources or any(source not in arrived for source in trigger.sources):
        return KEEP  # still waiting for someone
    db.execute("DELETE FROM arrived")
    return {source: json.loads(arrived[source].payload) for source in trigger.sources}
