"""The {{name}} sense: replace this example with what you want to observe.

`compute(db, peers, trigger)` runs when a reflex in nerve.yaml fires (every 1m
to start with) or on demand: `nerve sense compute {{name}}`. It runs in one
transaction: return a value to commit what you wrote and emit it as a signal;
return KEEP (from nerve_cli.sdk) to commit without a signal; return None to
stay silent (everything written is rolled back); raising also rolls back.
`db` is this sense's database; `peers` holds read-only handles on the senses
listed under `senses.{{name}}.peers` in nerve.yaml.

`trigger` says why it runs (`trigger.reason`: interval, cron, signal,
debounced, demand, overdue, backlog, retry) and carries `trigger.events`:
every signal or `nerve emit` event of the senses and channels in its reflex's
`on:` list since the last compute that consumed them, oldest first, each with
`.source`, `.id`, `.ts` and `.payload`. Events are delivered exactly once: a
compute that rolls back gets them again. `trigger.log` reads the engine's log.
Leave the third parameter out (`compute(db, peers)`) if you need none of this.
"""

import time

from .schema import Reading


def compute(db, peers, trigger):
    # With `on: [task.created]` in its reflex, trigger.events holds one event per
    # `nerve emit task.created '{"id": 7}'` since the last compute: event.payload == {"id": 7}.
    last = db.rows(Reading, order_by="ts DESC", limit=1)
    count = last[0].count + 1 if last else 1
    db.insert(Reading(ts=time.time_ns() // 1_000_000, count=count, reason=trigger.reason, events=len(trigger.events)))
    return {"count": count}  # the signal's payload: anything JSON can hold
