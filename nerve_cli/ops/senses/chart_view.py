"""Drawing a Series with plotext: real time on the x axis, one line per stretch of data, gaps left blank.

plotext keeps one global figure, so `draw` clears it first; the result is
text (ANSI colours only when asked), used by `nerve sense show --chart` and
by `nerve top`'s sense screen alike.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from nerve_cli.contract.times import display
from nerve_cli.ops.senses.chart import Series
from nerve_cli.words import plural

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TICKS = 5


def draw(series: Series, width: int, height: int, color: bool = False, utc: bool = False) -> str:
    """The chart as text, `width` × `height` characters; the time axis in local time (its zone in the title) or UTC."""
    import plotext as plt  # ~25 ms: only a chart pays for it (`nerve top` opens without one)

    plt.clf()
    plt.plotsize(width, height)
    plt.theme("pro" if color else "clear")
    start, end = series.points[0][0], series.points[-1][0]
    for segment in series.segments():
        xs = [(t - start) / 1000 for t, _ in segment]
        ys = [v for _, v in segment]
        # a lone point between two gaps would draw nothing as a line
        draw_one = plt.plot if len(segment) > 1 else plt.scatter
        draw_one(xs, ys, marker="braille" if len(segment) > 1 else "•", color="cyan" if color else None)
    ticks = [(end - start) / 1000 * i / (TICKS - 1) for i in range(TICKS)]
    plt.xticks(ticks, [tick_label(start + int(s * 1000), end - start, utc) for s in ticks])
    plt.title(f"{series.sense} · {series.column} · time in {zone(start, utc)}")
    text = plt.build()
    return text if color else ANSI.sub("", text)


def _at(ts_ms: int, utc: bool) -> datetime:
    when = datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc)
    return when if utc else when.astimezone()


def zone(ts_ms: int, utc: bool) -> str:
    return "UTC" if utc else _at(ts_ms, utc).tzname() or _at(ts_ms, utc).strftime("%z")


def tick_label(ts_ms: int, span_ms: int, utc: bool = False) -> str:
    fmt = "%m-%d %H:%M" if span_ms > 86_400_000 else "%H:%M:%S" if span_ms < 3_600_000 else "%H:%M"
    return _at(ts_ms, utc).strftime(fmt)


def summary(series: Series, utc: bool = False) -> list[str]:
    """The lines under the chart: where the points came from, the range of values, every gap."""
    values = [v for _, v in series.points]
    out = [f"{plural(len(values), 'point')} ({series.archived} archived, {series.live} live) from "
           f"{display(series.points[0][0], utc=utc)} to {display(series.points[-1][0], utc=utc)} · min {min(values):g} · "
           f"max {max(values):g} · last {values[-1]:g}"]
    if series.skipped:
        out.append("1 row was not a number and is left out" if series.skipped == 1
                   else f"{series.skipped} rows were not numbers and are left out")
    for before, after in series.gaps:
        out.append(f"gap: no data from {display(before, utc=utc)} to {display(after, utc=utc)} "
                   f"({_span(after - before)})")
    return out


def _span(ms: int) -> str:
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and len(parts) < 2:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts) or f"{ms}ms"
