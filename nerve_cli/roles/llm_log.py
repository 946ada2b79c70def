"""llm's own logs.db, written beside the rounds, never in their way.

When the user's llm logging is on (`llm logs on`, its default) each model call
a role makes is recorded in llm's logs.db, as `llm prompt` records it, so `llm
logs` shows Nerve's calls beside the user's own. llm's file is in rollback-
journal mode (the user's to choose, not ours) and `log_to_db` commits row by
row: a call's record costs several fsyncs, 14 ms a round on this kind of machine
when it was written before the round's answer, with a connection opened and
migrated each time. So one writer thread per process keeps one connection per
file (migrated once) and writes the calls in the order they were made; a round
hands its response over and goes on. The writer gathers what is handed over
for up to GATHER seconds before it writes, so a round's hand-over wakes no
thread (one wake-up a batch, not one a call) and the batch is one commit.

llm stores a call's whole input chain, message by message, each hashed from
its parent and looked up: logging the k-th call of a conversation costs O(k)
(8 ms a call at 600 rounds, so a long thread's writer fell behind its rounds
and a stopping worker's flush could time out). The writer's store remembers
which messages it has stored, by identity (a conversation's calls share their
earlier messages), and only new ones go through llm; another connection's
commit (`PRAGMA data_version`) forgets them all. The rows are llm's own, the same
as `log_to_db` writes. The record is a copy (the round's own message, with
model, usage and duration, is in Nerve's log first): a worker
killed before its writer caught up loses at most the copies still queued, and a
worker stopping flushes them (`flush`, and at interpreter exit).
"""

from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

FLUSH_TIMEOUT = 5.0  # seconds a stopping worker waits for its queued records
MAX_BATCH = 100  # records written in one transaction
GATHER = 0.1  # seconds the writer collects records before it writes them (a flush writes at once)
WHERE_FROM = ("LLM_USER_PATH", "XDG_CONFIG_HOME", "HOME")  # what llm's user_dir reads (click's app dir on Linux)


class LlmLog:
    def __init__(self, gather: float = GATHER) -> None:
        self._gather = gather
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._hurry = threading.Event()  # set while a flush waits: write what is queued now
        self._flushes = 0  # flushes asked for and not served yet
        self._places: dict[tuple[str | None, ...], tuple[Path, Path]] = {}
        self._stores: dict[Path, Any] = {}  # logs.db path → the writer's _KnownChains on its own connection

    def submit(self, response: Any) -> None:
        """Record `response` (an llm Response or ChainResponse) in llm's logs.db, unless logging is off."""
        folder, logs_db = self._where()
        if (folder / "logs-off").exists():  # looked at per call: `llm logs off` applies at once
            return
        if self._thread is None:
            self._start()
        self._queue.put((logs_db, response))  # the file as the call's environment names it, now

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait until every record submitted so far is written (False: `timeout` passed first)."""
        if self._thread is None:
            return True
        done = threading.Event()
        with self._lock:
            self._flushes += 1
            self._hurry.set()  # the writer gathers no more until every flush asked for is served
        self._queue.put(done)
        return done.wait(timeout)

    def _where(self) -> tuple[Path, Path]:
        """(llm's folder, its logs.db) as the environment names them now: llm's answer, kept per value of what
        it reads (`user_dir` creates the folder each time it is asked, two syscalls a round)."""
        key = tuple(os.environ.get(name) for name in WHERE_FROM)
        where = self._places.get(key)
        if where is None:
            import llm  # loaded already by the role that made the call
            from llm.cli import logs_db_path  # with llm's CLI: only a worker logging a call pays for it

            where = self._places[key] = (llm.user_dir(), Path(logs_db_path()))
        return where

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_all, name="nerve-llm-log", daemon=True)
                self._thread.start()
                atexit.register(self.flush)  # an offline run's process ends normally: its records are written

    def _write_all(self) -> None:
        while True:
            first = self._queue.get()
            if not isinstance(first, threading.Event):
                self._hurry.wait(self._gather)  # what comes meanwhile is not woken for: it waits in the queue
            batch = [first]
            while len(batch) < MAX_BATCH:  # what queued goes in the same transaction: one commit
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            calls = [item for item in batch if not isinstance(item, threading.Event)]
            for path in dict.fromkeys(path for path, _ in calls):  # in order, one transaction per file
                self._write(path, [response for where, response in calls if where == path])
            served = [item for item in batch if isinstance(item, threading.Event)]
            with self._lock:
                self._flushes -= len(served)
                if not self._flushes:
                    self._hurry.clear()
            for item in served:
                item.set()

    def _write(self, path: Path, responses: list[Any]) -> None:
        try:
            store = self._stores.get(path)
            if store is None:
                import sqlite_utils  # with llm's migrations: only a worker logging a model call pays for them

                store = self._stores[path] = _known_chains(sqlite_utils.Database(path))  # migrated once
            import llm  # loaded already by the roles that made the calls

            store.forget_if_changed()
            with store.db.atomic():  # llm commits each of its rows: inside one transaction they are savepoints
                for response in responses:
                    for one in _single_calls(response):
                        if isinstance(one, llm.Response):
                            store.log(one)
                        else:  # a kind this does not know: llm logs it its own way
                            one.log_to_db(store.db)
            store.committed()
        except Exception as exc:  # the answer is what matters; the log is a copy
            print(f"nerve: could not log {len(responses)} model call(s) in llm's logs.db: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)


def _single_calls(response: Any) -> list[Any]:
    """What `response.log_to_db` logs, as sync llm Responses; `response` itself when it is another kind (it is
    then logged by its own `log_to_db`)."""
    import llm  # loaded already by the roles that made the calls

    if isinstance(response, llm.Response):
        return [response]
    if isinstance(response, llm.AsyncResponse) and response._done:
        return [response._to_sync_response()]  # as AsyncResponse.log_to_db does
    calls = getattr(response, "_responses", None)  # a chain: each of its calls, as its log_to_db does
    if isinstance(calls, list) and all(isinstance(c, (llm.Response, llm.AsyncResponse)) for c in calls):
        return [one for call in calls for one in _single_calls(call)]
    return [response]


def _known_chains(db: Any) -> Any:
    """An llm LogStore on `db` that stores a conversation's earlier messages once (see the module's text)."""
    from llm.logs import LogStore  # with llm: only a worker logging a model call imports it

    class KnownChains(LogStore):
        def __init__(self, db: Any) -> None:
            super().__init__(db)  # applies llm's migrations
            self._known: dict[tuple[str | None, int], tuple[Any, str]] = {}  # (parent, id(message)) → (ref, hash)
            self._version = self._data_version()

        def ensure_chain(self, messages: Any, parent: str | None = None, fragments: Any = None) -> str | None:
            tip = parent
            for message in messages:
                key = (tip, id(message))
                known = self._known.get(key)
                if known is not None and known[0]() is message:
                    tip = known[1]
                    continue
                tip = super().ensure_chain([message], parent=tip, fragments=fragments)
                if tip is not None:
                    self._known[key] = (weakref.ref(message, self._forgetting(key)), tip)
            return tip

        def _forgetting(self, key: tuple[str | None, int]) -> Any:
            """The callback for a message's death: its id may be another message's next."""
            return lambda _: self._known.pop(key, None)

        def forget_if_changed(self) -> None:
            if self._data_version() != self._version:  # another connection wrote (llm logs, a prune, …)
                self._known.clear()

        def committed(self) -> None:
            self._version = self._data_version()

        def _data_version(self) -> int:
            return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    return KnownChains(db)


LOG = LlmLog()  # the process's one writer
