"""Durable emits: an external event is committed to data/events.db before anyone hears of it.

`emit()` validates the event on the loop (channel, payload size, key) and
commits it, and only then are the events logged, their listeners triggered
(`on_stored`) and the futures resolved — so the answer to `nerve emit` means
"committed", and no listener can start before the event it is woken for is
readable.

Where the commit runs: on the loop itself, when it can take the write lock at
once and the batch is small (a large payload always goes to the thread) (a one-row WAL commit costs
tens of µs; a hop through a thread costs more and, on a busy machine, much more at the tail). When it cannot — another
writer (`nerve archive`, an offline `nerve emit`) holds the lock, or a write
is already waiting — the batch goes to the one writer thread, which waits for
the lock (busy_timeout) while the loop carries on; emits arriving meanwhile
queue behind it and are committed together (group commit), in order. The
loop's connection never checkpoints (`wal_autocheckpoint=0`: a checkpoint
fsyncs); the writer thread checkpoints, on its own connection, every
`CHECKPOINT_EVERY` commits. A write that fails (disk full, the lock held past
its timeout) refuses every emit of its batch with the reason: nothing
half-stored, nothing acknowledged that is not on disk.

When the commit runs: at the end of the loop pass the first emit arrived in
(`call_soon`), so that the emits of one pass — a socket batch, the requests of
several clients read in the same pass, the emits several finished computes
handed over — are one commit and one routing, not one each. The cost is one
loop turn before the commit; under a steady stream it is what keeps a commit per
event from being the ceiling.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import orjson

from nerve_cli.store.events import EventNotStored, EventStore, StoredEvent, checkpoint, new_event

# Gets each stored event with its payload (the stored JSON, as an orjson.Fragment), in order; returns the
# senses each one woke.
OnStored = Callable[[list[tuple[StoredEvent, Any]]], list[list[str]]]
INLINE_BYTES = 256 * 1024  # payload bytes a batch may have to be committed on the loop itself
CHECKPOINT_EVERY = 1000  # commits between two WAL checkpoints (about one default autocheckpoint's worth)

# channel, JSON, key, origin (fleet host), via (webhook), schema version, hash, traceparent (W3C; not stored),
# cause (its causal depth and path, kernel.core.causes; not stored), then the emitter's future
Item = tuple[str, "str | None", "str | None", "str | None", "str | None", "str | None", "str | None", "str | None",
             Any, asyncio.Future]
# what emit_many takes: (channel, payload, key, origin[, traceparent[, cause]])
Event = (tuple[str, Any, "str | None", "str | None"] | tuple[str, Any, "str | None", "str | None", "str | None"]
         | tuple[str, Any, "str | None", "str | None", "str | None", Any])


class EmitDesk:
    def __init__(self, path: Path, on_stored: OnStored) -> None:
        self.path = Path(path)
        # opened by the first emit (no events, no events.db): one connection for the loop, which never waits
        # for the lock, and one for the writer thread, which does
        self.store: EventStore | None = None
        self._waiting_store: EventStore | None = None
        self.on_stored = on_stored
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="events")
        self._queue: list[Item] = []
        self._writing: asyncio.Future | None = None  # a batch in the writer thread
        self._checkpointing: asyncio.Future | None = None
        self._flushing = False  # a commit of the queue is scheduled for the end of this loop pass
        self.commits = 0  # batches committed

    def emit(self, channel: Any, payload: Any, key: Any = None, origin: str | None = None, *,
             via: str | None = None, schema_version: Any = None, hashed: bool = False,
             traceparent: str | None = None, cause: Any = None) -> asyncio.Future:
        """Store one event; the future resolves to (StoredEvent, woken senses) once it is committed and routed.

        `origin`: the fleet host the event was received from (None: emitted here); `via`: how it arrived here
        when not by nerve emit, the socket or MCP ("webhook"); `traceparent`: the W3C trace context it came
        with (handed to the routing with the stored event, not stored); `cause`: its causal depth and path
        (likewise; None: the outside world's). Raises EventError at once for an event that cannot be stored as given.
        """
        return self._queued([(*new_event(channel, payload, key, schema_version, hashed, origin, via), traceparent,
                              cause)])[0]

    def emit_many(self, events: list[Event]) -> list[asyncio.Future]:
        """Store (channel, payload, key, origin[, traceparent]) events in order, in one commit when the lock is
        free.

        Raises EventError before queueing any of them when one cannot be stored as given.
        """
        return self._queued([(*new_event(e[0], e[1], e[2], origin=e[3]), e[4] if len(e) > 4 else None,
                              e[5] if len(e) > 5 else None) for e in events])

    def _queued(self, checked: list[tuple]) -> list[asyncio.Future]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in checked]
        self._queue.extend((*item, future) for item, future in zip(checked, futures))
        if self._writing is None and futures and not self._flushing:
            self._flushing = True
            loop.call_soon(self._flush)
        return futures

    def _flush(self) -> None:
        self._flushing = False
        if self._writing is None and self._queue:
            self._write()

    def _write(self) -> None:
        batch, self._queue = self._queue, []
        items = [b[:7] for b in batch]
        large = sum(len(b[1] or "") for b in batch) > INLINE_BYTES  # megabytes to copy and write: not on the loop
        if self.store is not None and not large:
            try:
                stored = self.store.append(items)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    self._refuse(batch, exc)
                    return
            else:
                self._stored(batch, stored)
                return
        # first emit (the database is created in the thread), or the lock is taken: wait for it off the loop
        self._writing = asyncio.get_running_loop().run_in_executor(self._executor, self._append, items)
        self._writing.add_done_callback(lambda done: self._written(batch, done))

    def _append(self, items: list[tuple]) -> list[StoredEvent]:
        """In the writer thread."""
        if self._waiting_store is None:
            self._waiting_store = EventStore(self.path, autocheckpoint=False)
        stored = self._waiting_store.append(items)
        if self.store is None:  # opened here too, so that the loop never pays for the schema check
            self.store = EventStore(self.path, autocheckpoint=False, wait=False)
        return stored

    def _written(self, batch: list[Item], done: asyncio.Future) -> None:
        self._writing = None
        error = done.exception()
        if error is not None:
            self._refuse(batch, error)
        else:
            self._stored(batch, done.result())
        if self._queue:
            self._write()

    def _stored(self, batch: list[Item], stored: list[StoredEvent]) -> None:
        # the payload as the JSON text just stored: logging it copies bytes instead of encoding megabytes again
        fresh = [(event if item[7] is None and item[8] is None else replace(event, traceparent=item[7], cause=item[8]),
                  None if item[1] is None else orjson.Fragment(item[1]))
                 for event, item in zip(stored, batch) if not event.duplicate]
        woken = iter(self.on_stored(fresh))
        for event, (*_, future) in zip(stored, batch):
            targets = [] if event.duplicate else next(woken)
            if not future.done():
                future.set_result((event, targets))
        self.commits += 1
        if self.commits % CHECKPOINT_EVERY == 0 and self._checkpointing is None:
            self._checkpointing = asyncio.get_running_loop().run_in_executor(self._executor, checkpoint, self.path)
            self._checkpointing.add_done_callback(lambda _: setattr(self, "_checkpointing", None))

    def _refuse(self, batch: list[Item], error: BaseException) -> None:
        for *_, future in batch:
            if not future.done():
                future.set_exception(EventNotStored(
                    f"could not store the event in {self.path}: {error}; nothing was stored, send it again"))

    async def close(self) -> None:
        """Let the commit in progress (and what queued behind it) finish, then close the database."""
        while self._flushing or self._writing is not None or self._checkpointing is not None:
            pending = [f for f in (self._writing, self._checkpointing) if f is not None]
            if pending:
                await asyncio.wait(pending)
            await asyncio.sleep(0)  # let the done callbacks run (and start the next batch, if any)
        self._executor.shutdown(wait=True)
        for store in (self.store, self._waiting_store):
            if store is not None:
                store.close()
