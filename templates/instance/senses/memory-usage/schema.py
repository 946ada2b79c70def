"""Tables of the memory-usage sense. `nerve sense migrate memory-usage` turns changes here into SQL."""

from nerve_cli.sdk import table


@table(pk="ts", time="ts")  # time= is the column archiving uses (unix ms)
class Sample:
    ts: int  # unix ms
    percent: float  # used, 0-100
    used: int  # bytes
    available: int  # bytes a new process could get without swapping
