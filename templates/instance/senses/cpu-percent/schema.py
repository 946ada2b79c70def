"""Tables of the cpu-percent sense. `nerve sense migrate cpu-percent` turns changes here into SQL."""

from nerve_cli.sdk import table


@table(pk="ts", time="ts")  # time= is the column archiving uses (unix ms)
class Sample:
    ts: int  # unix ms
    percent: float  # CPU busy since the previous sample, all cores, 0-100
