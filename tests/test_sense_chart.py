"""`nerve sense show NAME --chart`: archived and live rows on one time axis, the gap between them left blank."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from archive_data import DAY, day_ms, make_sense
from conftest import cli

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive
from nerve_cli.store.logs import dumps

FIRST = 20_000          # 2024-10-04
LIVE_DAY = FIRST + 9    # three days after the last archived one



@pytest.fixture
def inst(home: Path) -> Layout:
    """Sense `cpu`: six archived days (4 signals and 4 `sample` rows a day), then five live rows 3 days later."""
    home.mkdir(parents=True)
    (home / "nerve.yaml").write_text("senses:\n  cpu: {}\n")
    layout = Layout(home)
    make_sense(layout, "cpu", FIRST, 6, 4)
    assert archive(home, older_than_s=86400, now_ms=day_ms(LIVE_DAY)).ok
    conn = sqlite3.connect(layout.sense_db("cpu"))
    assert conn.execute("SELECT COUNT(*) FROM _signals").fetchone()[0] == 0  # every old row is archived
    live = [day_ms(LIVE_DAY) + (i + 1) * 3_600_000 for i in range(5)]
    conn.executemany("INSERT INTO _signals (ts, payload) VALUES (?, ?)", [(t, dumps({"value": 9.0})) for t in live])
    conn.executemany("INSERT INTO sample (ts, value) VALUES (?, ?)", [(t, 7.5) for t in live])
    conn.commit()
    conn.close()
    return layout


def plot_columns(text: str) -> list[bool]:
    """For each column inside the chart's frame: does any row draw something there?"""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if "┌" in line)
    bottom = next(i for i, line in enumerate(lines) if "└" in line)
    left = lines[top].index("┌") + 1
    right = lines[top].index("┐")
    rows = [line[left:right] for line in lines[top + 1:bottom]]
    return [any(row[c] != " " for row in rows) for c in range(right - left)]


def runs(flags: list[bool]) -> list[tuple[bool, int]]:
    out: list[tuple[bool, int]] = []
    for flag in flags:
        if out and out[-1][0] == flag:
            out[-1] = (flag, out[-1][1] + 1)
        else:
            out.append((flag, 1))
    return out


def test_chart_spans_archived_and_live_rows_with_the_gap_blank(inst: Layout) -> None:
    result = cli("sense", "show", "cpu", "--chart", "--column", "value")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "24 points" not in text and "29 points (24 archived, 5 live)" in text
    gap = next(line for line in text.splitlines() if line.startswith("gap: "))
    assert "(3d " in gap
    utc = cli("sense", "show", "cpu", "--chart", "--column", "value", "--utc").output
    assert " UTC to " in next(line for line in utc.splitlines() if line.startswith("gap: "))  # the display rule
    # both ends of the time axis are labelled with their real dates
    first, last = (datetime.fromtimestamp(day_ms(d) / 1000).strftime("%m-%d") for d in (FIRST, LIVE_DAY))
    assert first in text and last in text
    # drawn: the archived stretch, blank columns for the gap, the live stretch (no line bridges it)
    shape = runs(plot_columns(text))
    drawn = [n for flag, n in shape if flag]
    blank_inside = [n for flag, n in shape[1:-1] if not flag]
    assert len(drawn) == 2 and max(blank_inside) >= 10, shape
    # times follow the display rule: local with the zone named, or UTC with --utc
    utc = cli("sense", "show", "cpu", "--chart", "--column", "value", "--utc").output
    assert "time in UTC" in utc and "10-04 00:00" in utc
    assert re.search(r"UTC \(3d \d+h\)$", next(line for line in utc.splitlines() if line.startswith("gap: ")))


def test_chart_json_window_and_table_columns(inst: Layout) -> None:
    data = json.loads(cli("sense", "show", "cpu", "--chart", "--column", "value", "--json").output)
    assert (data["archived"], data["live"], len(data["gaps"])) == (24, 5, 1)
    gap = data["gaps"][0]
    assert gap["to_ms"] == day_ms(LIVE_DAY) + 3_600_000 and gap["to_ms"] - gap["from_ms"] > 3 * DAY - DAY
    # --since inside the live day reads no archived day; --until before it reads only the archive
    since = datetime.utcfromtimestamp(day_ms(LIVE_DAY) / 1000).strftime("%Y-%m-%d")
    live = json.loads(cli("sense", "show", "cpu", "--column", "value", "--since", since, "--utc", "--json").output)
    assert (live["archived"], live["live"]) == (0, 5)
    old = json.loads(cli("sense", "show", "cpu", "--column", "value", "--until", since, "--utc", "--json").output)
    assert (old["archived"], old["live"]) == (24, 0)
    # a column of one of the sense's tables, against its time= column, archived rows included
    table = json.loads(cli("sense", "show", "cpu", "--chart", "--column", "sample.value", "--json").output)
    assert (table["archived"], table["live"]) == (24, 5) and table["points"][-1]["value"] == 7.5
    assert cli("sense", "show", "cpu", "--chart", "--column", "sample.value").exit_code == 0


def test_chart_refuses_what_it_cannot_plot(inst: Layout) -> None:
    objects = cli("sense", "show", "cpu", "--chart")
    assert objects.exit_code == 1 and "are not numbers: pick a numeric key" in objects.output
    assert "--column sample.COLUMN" in objects.output
    bad = cli("sense", "show", "cpu", "--chart", "--column", "sample.nope")
    assert bad.exit_code == 1 and "table 'sample' has no column 'nope'" in bad.output
    until = cli("sense", "show", "cpu", "--chart", "--until", "yesterday")
    assert until.exit_code == 2 and "Invalid value for --until: 'yesterday' is not a time" in until.output
    unknown = cli("sense", "show", "cpuu", "--chart")
    assert unknown.exit_code == 1 and "no sense `cpuu`" in unknown.output


def test_one_point_and_one_skipped_row_are_counted_in_the_singular(inst: Layout) -> None:
    conn = sqlite3.connect(inst.sense_db("cpu"))
    conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (day_ms(LIVE_DAY) + 285 * 60_000, dumps("n/a")))
    conn.commit()
    conn.close()
    since = datetime.utcfromtimestamp((day_ms(LIVE_DAY) + 270 * 60_000) / 1000).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = cli("sense", "show", "cpu", "--chart", "--column", "value", "--since", since, "--utc").output
    assert "1 point (0 archived, 1 live)" in text, text
    assert "1 row was not a number and is left out" in text
