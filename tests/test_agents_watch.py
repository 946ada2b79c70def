"""A watch of an agent's databases (agents.watch.Watch), as the MCP server's shared poller uses it: looked at in
a thread while its waiter may close it on the event loop."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from nerve_cli.agents.watch import Watch


def _open_fds(path: Path) -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found += 1
        except OSError:
            continue
    return found


def _db(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    return path


def test_a_closed_watch_opens_nothing_again(tmp_path: Path) -> None:
    """The poller may look once more at a watch its waiter has just closed: that look is nothing, not a
    connection left open for ever."""
    path = _db(tmp_path)
    watch = Watch([path])
    assert watch.changed() is False and _open_fds(path) == 1
    watch.close()
    assert watch.changed() is False
    assert _open_fds(path) == 0


def test_a_watch_closed_while_a_thread_looks_at_it_raises_nothing(tmp_path: Path) -> None:
    """wait_for_events' waiter closes its watch on the loop while the shared poller's thread may be in
    `changed()` ("dictionary changed size during iteration" once, in a full suite)."""
    paths = [_db(tmp_path / str(i)) for i in range(8)]
    errors: list[BaseException] = []
    for _ in range(200):
        watch = Watch(list(paths))
        go = threading.Event()

        def look(w: Watch = watch) -> None:
            go.set()
            try:
                for _ in range(5):
                    w.changed()
            except BaseException as exc:  # what the test looks for
                errors.append(exc)

        thread = threading.Thread(target=look)
        thread.start()
        go.wait()
        watch.close()
        thread.join()
        watch.close()
    assert not errors, errors[:3]
    assert sum(_open_fds(p) for p in paths) == 0
