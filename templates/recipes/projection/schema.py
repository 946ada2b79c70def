"""Tables of the {{name}} projection: the folded state and the value last published.

No `time=` marker: a projection's state must not be archived away.
"""

from nerve_cli.sdk import table


@table(pk="key")
class Item:
    key: str  # what an event is about (see key_of in sense.py)
    source: str  # the source of the latest event about it
    payload: str  # that event's payload, as JSON
    ts: int  # its time, unix ms


@table(pk="name")
class Published:
    name: str
    value: str  # the projected value last signalled, as JSON
