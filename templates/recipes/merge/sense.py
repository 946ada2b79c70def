"""The {{name}} merge router: one signal combining the latest payload of each source.

Whenever any source in this sense's `on:` list sends something, it signals
`{source: latest payload}` for every source (null for one not heard from yet).
"""

import json

from .schema import Latest


def compute(db, peers, trigger):
    if not trigger.events:
        return None  # nothing new to merge
    for event in trigger.events:
        db.upsert(Latest(source=event.source, payload=json.dumps(event.payload), ts=event.ts))
    latest = {row.source: json.loads(row.payload) for row in db.rows(Latest)}
    return {source: latest.get(source) for source in trigger.sources}
