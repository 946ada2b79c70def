"""Tables of the {{name}} wait-all router: who has arrived since the last fire."""

from nerve_cli.sdk import table


@table(pk="source")
class Arrived:
    source: str
    payload: str  # its latest payload since the last fire, as JSON
    ts: int
