"""Durable emits: an external event is committed to data/events.db before anyone hears of it.

`emit()` validates the event on the loop (channel, payload size, key), queues
it and returns a future. One writer thread commits the queue in a single
transaction (group commit: emits that arrive while a commit is running go into
the next one), and only then, back on the loop, are the events logged and
their listeners triggered (`on_stored`), and the futures resolved — so the
answer to `nerve emit` means "committed", and no listener can start before
the event it is woken for is readable. A write that fails (disk full, the
database locked past its timeout) refuses every emit of that batch with the
reason: nothing half-stored, nothing acknowledged that is not on disk.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from nerve_cli.store.events import EventError, EventStore, StoredEvent, check_channel, check_key, encode_payload

# Gets each stored event with its decoded payload, in order; returns the senses each one woke.
OnStored = Callable[[list[tuple[StoredEvent, Any]]], list[list[str]]]


class EmitDesk:
    def __init__(self, path: Path, on_stored: OnStored) -> None:
        self.path = Path(path)
        self.store: EventStore | None = None  # opened by the first emit: no events, no events.db
        self.on_stored = on_stored
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="events")
        self._queue: list[tuple[str, str | None, str | None, Any, asyncio.Future]] = []
        self._writing: asyncio.Future | None = None

    def emit(self, channel: Any, payload: Any, key: Any = None) -> asyncio.Future:
        """Queue one event; the future resolves to (StoredEvent, woken senses) once it is committed and routed.

        Raises EventError at once for an event that cannot be stored as given.
        """
        item = (check_channel(channel), encode_payload(payload), check_key(key))
        future = asyncio.get_running_loop().create_future()
        self._queue.append((*item, payload, future))
        if self._writing is None:
            self._write()
        return future

    def _write(self) -> None:
        batch, self._queue = self._queue, []
        loop = asyncio.get_running_loop()
        self._writing = loop.run_in_executor(self._executor, self._append, [b[:3] for b in batch])
        self._writing.add_done_callback(lambda done: self._written(batch, done))

    def _append(self, items: list[tuple[str, str | None, str | None]]) -> list[StoredEvent]:
        """In the writer thread."""
        if self.store is None:
            self.store = EventStore(self.path)
        return self.store.append(items)

    def _written(self, batch: list, done: asyncio.Future) -> None:
        self._writing = None
        error = done.exception()
        if error is not None:
            for *_, future in batch:
                if not future.done():
                    future.set_exception(EventError(
                        f"could not store the event in {self.path}: {error}; nothing was stored, send it again"))
        else:
            stored: list[StoredEvent] = done.result()
            fresh = [(event, item[3]) for event, item in zip(stored, batch) if not event.duplicate]
            woken = iter(self.on_stored(fresh))
            for event, (*_, future) in zip(stored, batch):
                targets = [] if event.duplicate else next(woken)
                if not future.done():
                    future.set_result((event, targets))
        if self._queue:
            self._write()

    async def close(self) -> None:
        """Let the commit in progress (and what queued behind it) finish, then close the database."""
        while self._writing is not None:
            await asyncio.wait([self._writing])
            await asyncio.sleep(0)  # let _written run (and start the next batch, if any)
        self._executor.shutdown(wait=True)
        if self.store is not None:
            self.store.close()
