"""Reading history back: hot rows from the databases plus archived JSONL days when a range reaches them.

Archived files are read only when the asked-for range reaches days that have
files (`--since 90d`, or a sense history asked for more rows than are hot).
Rows are merged by id (ids are AUTOINCREMENT, never reused, so a row has the
same id in the database and in its archive file) and returned newest last.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from nerve_cli.config.model import check_name
from nerve_cli.home import Layout
from nerve_cli.store.jsonl import iter_lines, list_files
from nerve_cli.store.logs import iso_ms, open_readonly, parse_payload, query_logs


@dataclass
class LogHistory:
    rows: list[dict]
    archived_days: list[str] = field(default_factory=list)  # days read from the archive, in order
    folder: Path | None = None
    problems: list[str] = field(default_factory=list)


def day_of(ts_ms: int) -> str:
    return iso_ms(ts_ms)[:10]


def newest(rows: Iterable[dict], limit: int | None) -> list[dict]:
    """Rows deduplicated by id, newest (largest id) last, at most `limit` of them; memory ~ limit."""
    if limit is None:
        unique = {r["id"]: r for r in rows}
        return [unique[k] for k in sorted(unique)]
    seen: set = set()
    heap: list[tuple[int, dict]] = []
    for row in rows:
        if row["id"] in seen:
            continue
        seen.add(row["id"])
        if len(heap) < limit:
            heapq.heappush(heap, (row["id"], row))
        elif row["id"] > heap[0][0]:
            seen.discard(heapq.heapreplace(heap, (row["id"], row))[0])
    return [row for _, row in sorted(heap, key=lambda item: item[0])]


def read_logs(
    home: Path,
    *,
    source: str | None = None,
    type: str | None = None,
    ref: str | None = None,
    since_ms: int | None = None,
    limit: int | None = None,
    until_ms: int | None = None,
) -> LogHistory:
    """Log rows like `query_logs`, plus archived days from `since_ms` (to `until_ms`) when `since_ms` is given."""
    layout = Layout(Path(home))
    hot = query_logs(layout.logs_db, source=source, type=type, ref=ref, since_ms=since_ms, limit=limit,
                     until_ms=until_ms)
    folder = layout.archive / "logs"
    files = list_files(folder, day_of(since_ms)) if since_ms is not None else []
    if until_ms is not None:
        files = [f for f in files if f.day <= day_of(until_ms)]
    if not files:
        return LogHistory(hot)
    history = LogHistory([], sorted({f.day for f in files}), folder)
    wanted = {"source": source, "type": type, "ref_id": ref}
    end = until_ms if until_ms is not None else float("inf")

    def archived() -> Iterator[dict]:
        for f in files:
            for row in iter_lines(f.path, history.problems):
                if since_ms <= row["ts"] < end and all(v is None or row.get(k) == v for k, v in wanted.items()):
                    yield row

    history.rows = newest(_chain(hot, archived()), limit)
    return history


def _chain(*parts: Iterable[dict]) -> Iterator[dict]:
    for part in parts:
        yield from part


def _hot_signals(path: Path, since_ms: int | None, limit: int | None) -> list[dict]:
    if not path.exists():
        return []
    sql, params = "SELECT id, ts, payload FROM _signals", []
    if since_ms is not None:
        sql += " WHERE ts >= ?"
        params.append(since_ms)
    sql += " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    conn = open_readonly(path)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_signals'").fetchone() is None:
            return []
        rows = [_signal(i, t, p) for i, t, p in conn.execute(sql, params)]
    finally:
        conn.close()
    rows.reverse()
    return rows


def _signal(id_: int, ts: int, payload: str | None) -> dict:
    return {"id": id_, "ts": ts, "time": iso_ms(ts), "payload": parse_payload(payload)}


def _archived_signal(line: dict) -> dict:
    """An archived `_signals` line: newer files hold the payload decoded (`"decoded": ["payload"]`), older ones as JSON text."""
    row = line["row"]
    if "payload" in (line.get("decoded") or ()):
        return {"id": row["id"], "ts": row["ts"], "time": iso_ms(row["ts"]), "payload": row.get("payload")}
    return _signal(row["id"], row["ts"], row.get("payload"))


SIGNAL_LINE = b'{"table":"_signals",'


def archived_counts(home: Path, name: str) -> dict[str, int]:
    """table → rows of that table in a sense's archive files (lines are counted, not parsed)."""
    counts: dict[str, int] = {}
    for f in list_files(Layout(Path(home)).sense_archive(check_name(name))):
        with open(f.path, "rb") as lines:
            for line in lines:
                if line.startswith(SIGNAL_LINE):
                    counts["_signals"] = counts.get("_signals", 0) + 1
                elif line.startswith(b'{"table":"'):
                    table = line[10:line.index(b'"', 10)].decode()
                    counts[table] = counts.get(table, 0) + 1
    return counts


def last_archived_signal(home: Path, name: str) -> int | None:
    """The ts of the newest archived signal of a sense (None when it has no archived signal)."""
    files = list_files(Layout(Path(home)).sense_archive(check_name(name)))
    for day in sorted({f.day for f in files}, reverse=True):
        stamps = [line["row"]["ts"] for f in files if f.day == day for line in iter_lines(f.path)
                  if isinstance(line, dict) and line.get("table") == "_signals" and line.get("row")]
        if stamps:
            return max(stamps)
    return None


def sense_history(home: Path, name: str, since_ms: int | None = None, limit: int | None = None) -> list[dict]:
    """A sense's signals `{"id", "ts", "time", "payload"}`, newest last: hot `_signals` rows, plus
    archived days when `since_ms` reaches them or fewer than `limit` rows are hot.

    `since_ms=None, limit=None` returns the whole history, archive included.
    """
    check_name(name)
    layout = Layout(Path(home))
    hot = _hot_signals(layout.sense_db(name), since_ms, limit)
    if limit is not None and len(hot) >= limit:
        return hot
    since_day = day_of(since_ms) if since_ms is not None else None
    files = list_files(layout.sense_archive(name), since_day)
    older: list[dict] = []
    # newest day first, so a `limit` stops reading as soon as it is met
    for day in sorted({f.day for f in files}, reverse=True):
        for f in (f for f in files if f.day == day):
            for line in iter_lines(f.path):
                row = line.get("row") if isinstance(line, dict) else None
                if line.get("table") == "_signals" and row and (since_ms is None or row["ts"] >= since_ms):
                    older.append(_archived_signal(line))
        if limit is not None and len(older) + len(hot) >= limit:
            break
    return newest(_chain(older, hot), limit)


