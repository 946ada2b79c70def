"""Tables of the disk-usage sense. `nerve sense migrate disk-usage` turns changes here into SQL."""

from nerve_cli.sdk import table


@table(pk="ts", time="ts")  # time= is the column archiving uses (unix ms)
class Sample:
    ts: int  # unix ms
    path: str  # the folder whose filesystem was measured
    percent: float  # used, 0-100
    used: int  # bytes
    free: int  # bytes
    total: int  # bytes
