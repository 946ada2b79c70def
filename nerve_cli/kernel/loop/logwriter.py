"""The log writer: rows are appended on the loop and committed in batches off it.

`log()` buffers a row (with the watermark it raises, `kernel.core.ledger`) and
arms one timer: the rows of the next `FLUSH_DELAY` go in one transaction, run
in a thread, so a `nerve archive` VACUUM holding the database never stalls
the loop. A failed commit keeps the rows buffered and retries a second later.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from nerve_cli.kernel.core.report import Report
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab.logrows import LogRow

FLUSH_DELAY = 0.01  # log rows are committed in batches at most this old
RETRY_DELAY = 1.0  # after a failed commit


class LogWriter:
    def __init__(self, logs: LogStore, path: Path, report: Report) -> None:
        self.logs = logs
        self.path = path
        self.report = report
        self.stopping = False  # set at shutdown: no more timers; LogStore.close commits what is left
        self._handle: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Future | None = None
        self._again = False

    def log(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None:
        self.logs.write(row, ts, mark)
        if self._handle is None and not self.stopping:
            self._handle = asyncio.get_running_loop().call_later(FLUSH_DELAY, self._flush)

    def stop(self) -> None:
        self.stopping = True

    async def close(self) -> None:
        """Wait for the commit under way (the rows still buffered are committed when the store closes)."""
        if self._flushing is not None:
            await asyncio.wait([self._flushing])

    def _flush(self) -> None:
        self._handle = None
        if self._flushing is not None:
            self._again = True
            return
        self._flushing = asyncio.get_running_loop().run_in_executor(None, self.logs.flush)
        self._flushing.add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future) -> None:
        self._flushing = None
        loop = asyncio.get_running_loop()
        if future.exception() is not None:  # disk full, locked: the rows stay buffered; retry and say so
            self.report("error", f"could not write {self.path}: {future.exception()}; retrying")
            self._handle = loop.call_later(RETRY_DELAY, self._flush)
        elif self._again or self.logs.pending():
            self._again = False
            if self._handle is None and not self.stopping:
                self._handle = loop.call_later(FLUSH_DELAY, self._flush)
