"""llm's own logs.db, written beside the rounds, never in their way.

When the user's llm logging is on (`llm logs on`, its default) each model call
a role makes is recorded in llm's logs.db, as `llm prompt` records it, so `llm
logs` shows Nerve's calls beside the user's own. llm's file is in rollback-
journal mode (the user's to choose, not ours) and `log_to_db` commits row by
row: a call's record costs several fsyncs, 14 ms a round on this kind of machine
when it was written before the round's answer, with a connection opened and
migrated each time. So one writer thread per process keeps one connection per
file (migrated once) and writes the calls in the order they were made; a round
hands its response over and goes on. The record is a copy (the round's own
message, with model, usage and duration, is in Nerve's log first): a worker
killed before its writer caught up loses at most the copies still queued, and a
worker stopping flushes them (`flush`, and at interpreter exit).
"""

from __future__ import annotations

import atexit
import queue
import sys
import threading
from pathlib import Path
from typing import Any

FLUSH_TIMEOUT = 5.0  # seconds a stopping worker waits for its queued records
MAX_BATCH = 100  # records written in one transaction


class LlmLog:
    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._databases: dict[Path, Any] = {}  # logs.db path → sqlite_utils.Database (the writer's own)

    def submit(self, response: Any) -> None:
        """Record `response` (an llm Response or ChainResponse) in llm's logs.db, unless logging is off."""
        import llm  # loaded already by the role that made the call

        if (llm.user_dir() / "logs-off").exists():  # looked at per call: `llm logs off` applies at once
            return
        from llm.cli import logs_db_path  # with llm's CLI: only a worker logging a call pays for it

        self._start()
        self._queue.put((Path(logs_db_path()), response))  # the file as the call's environment names it, now

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait until every record submitted so far is written (False: `timeout` passed first)."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_all, name="nerve-llm-log", daemon=True)
                self._thread.start()
                atexit.register(self.flush)  # an offline run's process ends normally: its records are written

    def _write_all(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:  # what queued meanwhile goes in the same transaction: one commit
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            calls = [item for item in batch if not isinstance(item, threading.Event)]
            for path in dict.fromkeys(path for path, _ in calls):  # in order, one transaction per file
                self._write(path, [response for where, response in calls if where == path])
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()

    def _write(self, path: Path, responses: list[Any]) -> None:
        try:
            db = self._databases.get(path)
            if db is None:
                import sqlite_utils  # with llm's migrations: only a worker logging a model call pays for them
                from llm.migrations import migrate  # (as above)

                db = sqlite_utils.Database(path)
                migrate(db)
                self._databases[path] = db
            with db.atomic():  # llm commits each of its rows: inside one transaction they are savepoints
                for response in responses:
                    response.log_to_db(db)
        except Exception as exc:  # the answer is what matters; the log is a copy
            print(f"nerve: could not log {len(responses)} model call(s) in llm's logs.db: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)


LOG = LlmLog()  # the process's one writer
