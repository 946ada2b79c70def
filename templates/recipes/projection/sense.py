"""The {{name}} projection: fold events into state, incrementally; signal only when the value changes.

Each compute receives only the events since the previous one
(`trigger.events`, from the sources in its reflex's `on:` list) and applies
them to the stored state with `fold` — history is never replayed, and a
rolled-back compute gets the same events again. The state advances silently
(`return KEEP` commits the rows without a signal); a signal goes out only when
`project(db)` — the value this projection publishes — differs from the one it
last published, with that value as its payload. Listen to it with the
`reaction` recipe, or any sense with `on: [{{name}}]`.
"""

import json

from nerve_cli.sdk import KEEP

from .schema import Item, Published


def key_of(event) -> str:
    """What an event is about: its payload's "id" when it has one."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    return str(payload.get("id", event.id))


def fold(db, event) -> None:
    """Apply one event to the state (here: the latest event per key)."""
    db.upsert(Item(key=key_of(event), source=event.source, payload=json.dumps(event.payload), ts=event.ts))


def project(db):
    """The value this projection publishes (here: how many keys it has seen)."""
    return {"items": db.query("SELECT count(*) AS n FROM item")[0]["n"]}


def compute(db, peers, trigger):
    for event in trigger.events:
        fold(db, event)
    value = project(db)
    last = db.rows(Published, limit=1)
    if last and json.loads(last[0].value) == value:
        return KEEP  # the state moved (or not), the published value did not: no signal
    db.upsert(Published(name="value", value=json.dumps(value)))
    return value
