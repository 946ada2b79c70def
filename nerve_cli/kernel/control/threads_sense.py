"""The built-in `nerve-threads` sense: every transition of a workflow thread, as a signal.

Thread outcomes are facts other senses may react to ("page me when a thread
fails", "when the review completes, start the deploy check") without reading
the log, which never triggers anything. Like `nerve-health` it is computed by
the kernel and is otherwise a sense like any other: its signals are rows of
`data/senses/nerve-threads.db` (`_signals`), listened to with `on:
[nerve-threads]`, each delivered exactly once by the listeners' cursors.

What it signals is what the workflow manager recorded: each thread status
change (queued, started, waiting, completed, failed, crashed, dropped,
cancelled, paused; a resumed start, and a paused thread's resume, are
`resumed`) becomes one signal, in order, with its
causal depth (`depth`: one deeper than the thread). The change is recorded as a
`thread_transitions` row of logs.db in the same transaction as the status row
it describes (`LogStore.write`); nerve-threads reads those, never the log's
rows, so a row put into `logs` by hand is signalled by no one. The manager wakes
it after each write of such rows; each compute copies the transitions after its
watermark (`_nerve_feed.transition_id`, in nerve-threads.db) and moves the
watermark in the same transaction as the signals, so every transition is
signalled exactly once even when the kernel is killed between the two
databases' commits, and the transitions of threads answered or run while no
engine ran (`nerve thread approve`, a standalone `nerve workflow run`) are
signalled at the next start. A new nerve-threads.db starts from the current
end: it signals what happens from then on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.config.model import THREADS_SENSE
from nerve_cli.kernel.control.health import BuiltinSenseDb
from nerve_cli.store.logs import open_readonly
from nerve_cli.store.sqlitefile import damaged, is_damage
from nerve_cli.vocab.states import ThreadStatus

FEED = "_nerve_feed"  # key → value: `transition_id`, the last thread_transitions row signalled
WATERMARK = "transition_id"
BATCH = 500  # transitions signalled per compute; a full batch is followed by another compute at once
_STATUSES = tuple(s.value for s in ThreadStatus)
# fields of a status row a transition carries, when the row has them
_FIELDS = ("reason", "question", "rounds", "waiting_for", "by", "via", "was", "origin")


class ThreadsStore(BuiltinSenseDb):
    """nerve-threads.db: `_signals`, and the watermark of what is signalled."""

    def __init__(self, path: Path, logs_path: Path) -> None:
        self.logs_path = logs_path
        super().__init__(path, THREADS_SENSE)

    def prepare(self) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {FEED} (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        # (a nerve-threads.db from before transitions kept `logs_id`: it starts again at the transitions' end)
        if self.conn.execute(f"SELECT 1 FROM {FEED} WHERE key = ?", (WATERMARK,)).fetchone() is None:
            self.conn.execute(f"INSERT INTO {FEED} (key, value) VALUES (?, ?)", (WATERMARK, self._end()))

    def _end(self) -> int:
        if not self.logs_path.exists():
            return 0
        conn = open_readonly(self.logs_path)
        try:
            return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM thread_transitions").fetchone()[0])
        except sqlite3.OperationalError:  # a logs.db from before transitions: its engine makes the table
            return 0
        finally:
            conn.close()

    def feed(self) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
        """Signal the thread transitions recorded since the last feed: [(signal id, payload)], and whether
        more wait (a full batch)."""
        signals, more, _paths = self.take()
        return signals, more

    def take(self) -> tuple[list[tuple[int, dict[str, Any]]], bool, list[list[str] | None]]:
        """`feed`, with each signal's causal path (the hops from the outside world, when recorded). Runs in a
        thread: SQLite may wait for a lock here."""
        after = self.conn.execute(f"SELECT value FROM {FEED} WHERE key = ?", (WATERMARK,)).fetchone()[0]
        rows = self._rows(after)
        if not rows:
            return [], False, []
        out, paths = [], []
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for _id, run_id, type_, payload, ts, depth, path in rows:
                    body = transition(run_id, type_, orjson.loads(payload) if payload else {}, ts)
                    body["depth"] = 1 if depth is None else depth  # (recorded without the engine: a person's)
                    cur = self.conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)",
                                            (ts, orjson.dumps(body).decode()))
                    out.append((cur.lastrowid or 0, body))
                    paths.append(orjson.loads(path) if path else None)
                self.conn.execute(f"UPDATE {FEED} SET value = ? WHERE key = ?", (rows[-1][0], WATERMARK))
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise damaged(self.path, str(exc), self.fix) from None
            raise
        return out, len(rows) >= BATCH, paths

    def _rows(self, after: int) -> list[tuple[int, str, str, str | None, int, int | None, str | None]]:
        conn = open_readonly(self.logs_path)
        try:
            marks = ",".join("?" * len(_STATUSES))
            return conn.execute(
                "SELECT t.id, l.ref_id, l.type, l.payload, l.ts, t.depth, t.path FROM thread_transitions t "
                f"JOIN logs l ON l.id = t.log_id WHERE t.id > ? AND l.source = 'workflow' AND l.type IN ({marks}) "
                "ORDER BY t.id LIMIT ?", (after, *_STATUSES, BATCH)).fetchall()
        except sqlite3.OperationalError:  # a logs.db from before transitions: nothing recorded yet
            return []
        finally:
            conn.close()


def transition(run_id: str, type_: str, payload: dict[str, Any], ts: int) -> dict[str, Any]:
    """A thread status row as nerve-threads' signal: {run_id, workflow, transition, status, at_ms, ...}."""
    # a resumed start, and the row a `nerve thread resume` writes (queued or waiting again)
    resumed = (type_ == ThreadStatus.STARTED and payload.get("resumed")) or payload.get("resumed_from") == "paused"
    out: dict[str, Any] = {"run_id": run_id, "workflow": payload.get("workflow"),
                           "transition": "resumed" if resumed else type_, "status": type_, "at_ms": ts}
    out.update({k: payload[k] for k in _FIELDS if k in payload})
    return out
