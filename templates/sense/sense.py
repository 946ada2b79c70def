"""The {{name}} sense: replace this example with what you want to observe.

`compute(db, peers)` runs when a reflex in nerve.yaml fires (every 1m to start
with) or on demand: `nerve sense compute {{name}}`. It runs in one transaction:
return a value to commit what you wrote and emit it as a signal; return None
to stay silent (everything written is rolled back); raising also rolls back.
`db` is this sense's database; `peers` holds read-only handles on the senses
listed under `senses.{{name}}.peers` in nerve.yaml.
"""

import time

from .schema import Reading


def compute(db, peers):
    last = db.rows(Reading, order_by="ts DESC", limit=1)
    count = last[0].count + 1 if last else 1
    db.insert(Reading(ts=time.time_ns() // 1_000_000, count=count))
    return {"count": count}  # the signal's payload: anything JSON can hold
