"""External events are archived like other rows: whole old days of events.db move to data/archive/events/."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nerve_cli.home import Layout
from nerve_cli.store.archive import archive, day_str
from nerve_cli.store.events import EventStore
from nerve_cli.store.jsonl import iter_lines

DAY_MS = 86_400_000
FIRST = 20_000


def test_old_events_move_to_jsonl_and_ids_never_come_back(home: Path) -> None:
    layout = Layout(home)
    store = EventStore(layout.events_db)
    store.append([("task.created", f'{{"n": {i}}}', None, None) for i in range(6)])
    # three days, two events each (written by hand: the store stamps "now")
    for i in range(6):
        store.conn.execute("UPDATE events SET ts = ? WHERE id = ?", ((FIRST + i // 2) * DAY_MS + i, i + 1))
    store.close()
    report = archive(home, older_than_s=0, now_ms=(FIRST + 2) * DAY_MS + 1)
    assert report.ok, report.problems
    folder = layout.archive / "events"
    files = sorted(p.name for p in folder.glob("*.jsonl"))
    assert files == [f"{day_str(FIRST)}.jsonl", f"{day_str(FIRST + 1)}.jsonl"]
    rows = [line["row"] for f in files for line in iter_lines(folder / f)]
    assert [(r["id"], r["channel"], r["payload"]) for r in rows] == [(i + 1, "task.created", f'{{"n": {i}}}') for i in range(4)]
    conn = sqlite3.connect(layout.events_db)
    assert [r[0] for r in conn.execute("SELECT id FROM events ORDER BY id")] == [5, 6]
    conn.close()
    store = EventStore(layout.events_db)
    assert store.append([("task.created", None, None, None)])[0].id == 7  # AUTOINCREMENT: an archived id is never reused
    store.close()
