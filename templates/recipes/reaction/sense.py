"""The {{name}} reaction: fires `{old, new}` when a projection's value changes.

List the projection in this sense's `on:`; each of its signals is its new
value. A compute that receives several (a burst) reacts once, from the value
before the burst to the value after it. Put the side effect in `react`; the
signal carries `{"source", "old", "new"}` for whoever listens to {{name}}.
"""

import json

from nerve_cli.sdk import KEEP

from .schema import Seen


def react(old, new) -> None:
    """The side effect of a change (notify someone, start a workflow with SenseResult, ...)."""


def compute(db, peers, trigger):
    if not trigger.events:
        return None  # woken without news (e.g. on demand): nothing changed
    seen = db.rows(Seen, limit=1)
    old = json.loads(seen[0].value) if seen else None
    new = trigger.events[-1].payload
    if new == old:
        return KEEP
    db.upsert(Seen(name="value", value=json.dumps(new)))
    react(old, new)
    return {"source": trigger.events[-1].source, "old": old, "new": new}
