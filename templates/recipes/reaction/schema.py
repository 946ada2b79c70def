"""Tables of the {{name}} reaction: the value it last saw."""

from nerve_cli.sdk import table


@table(pk="name")
class Seen:
    name: str
    value: str  # the projection's value after the last change, as JSON
