"""Tables of the {{name}} sense: the single source of truth for its database.

Change a class here, then run `nerve sense migrate {{name}}` to write the next
numbered SQL file under migrations/ (commit it with the change).
"""

from nerve_cli.sdk import table


@table(pk="ts", time="ts")  # time= names the unix-ms column archiving uses
class Reading:
    ts: int  # unix ms
    count: int  # how many times this sense has produced a signal
    reason: str  # why that compute ran (trigger.reason: interval, signal, demand, ...)
    events: int  # how many events of its `on:` sources it received
