"""Tables of the {{name}} heartbeat: when each source was last heard, and whether it is quiet now."""

from nerve_cli.sdk import table


@table(pk="source")
class Beat:
    source: str
    last_ms: int  # its last event (unix ms), or when this sense began listening
    quiet: bool  # it went quiet and has not been heard from since
