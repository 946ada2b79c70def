"""The {{name}} switch: pass on the events that match a predicate; stay silent otherwise.

Edit `matches`. A compute whose events all fail it returns None: nothing is
stored or signalled, and those events are still consumed — they were looked
at and found uninteresting, so they do not come back. Listeners of {{name}}
receive `{"matched": [{"source", "id", "payload"}, ...]}`.
"""


def matches(event) -> bool:
    """Which events pass (here: payloads with "status": "failed")."""
    return isinstance(event.payload, dict) and event.payload.get("status") == "failed"


def compute(db, peers, trigger):
    matched = [{"source": e.source, "id": e.id, "payload": e.payload} for e in trigger.events if matches(e)]
    return {"matched": matched} if matched else None
