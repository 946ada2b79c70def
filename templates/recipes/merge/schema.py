"""Tables of the {{name}} merge router: the latest payload of each source."""

from nerve_cli.sdk import table


@table(pk="source")
class Latest:
    source: str
    payload: str  # as JSON
    ts: int
