"""Drawing a Series with plotext: real time on the x axis, one line per stretch of data, gaps left blank.

plotext keeps one global figure, so `draw` clears it first; the result is
text (ANSI colours only when asked), used by `nerve sense show --chart` and
by `nerve top`'s sense screen alike.
"""

from __future__ import annotations

import re
from datetime import datetime

from nerve_cli.senses.chart import Series

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TICKS = 5


def draw(series: Series, width: int, height: int, color: bool = False) -> str:
    """The chart as text, `width` × `height` characters."""
    import plotext as plt

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
    plt.xticks(ticks, [tick_label(start + int(s * 1000), end - start) for s in ticks])
    plt.title(f"{series.sense} · {series.column}")
    text = plt.build()
    return text if color else ANSI.sub("", text)


def tick_label(ts_ms: int, span_ms: int) -> str:
    fmt = "%m-%d %H:%M" if span_ms > 86_400_000 else "%H:%M:%S" if span_ms < 3_600_000 else "%H:%M"
    return datetime.fromtimestamp(ts_ms / 1000).strftime(fmt)


def summary(series: Series) -> list[str]:
    """The lines under the chart: where the points came from, the range of values, every gap."""
    values = [v for _, v in series.points]
    out = [f"{len(values)} points ({series.archived} archived, {series.live} live) from "
           f"{_when(series.points[0][0])} to {_when(series.points[-1][0])} · min {min(values):g} · "
           f"max {max(values):g} · last {values[-1]:g}"]
    if series.skipped:
        out.append(f"{series.skipped} rows were not numbers and are left out")
    for before, after in series.gaps:
        out.append(f"gap: no data from {_when(before)} to {_when(after)} ({_span(after - before)})")
    return out


def _when(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _span(ms: int) -> str:
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and len(parts) < 2:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts) or f"{ms}ms"
