"""Agents' deliveries as spans: emit → `deliver AGENT` → ack, so a trace shows when an agent heard of an event.

Deliveries are made by whoever hands an agent its events — the hook command,
`nerve agent next`, the MCP server, the engine's Codex deliverer — each in its
own process, through `data/agents.db` (`store.inbox`). So the engine reads that
file, every `POLL` seconds while traces are on and nerve.yaml has agents: new
deliveries since the last read, and the ones still open (not acknowledged
then). Each is handed to `Tracing.delivery`, which parents it on the span of
the first event it carries (the emit, or the compute that signalled it:
`Tracing` keeps those contexts while agents exist). A delivery made before this
engine started (its `created_ms` before the engine's start) is not traced. The read runs in a thread; it is one indexed
query on a small table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from nerve_cli.kernel.trace.spans import Tracing
from nerve_cli.store.inbox import deliveries_since

POLL = 0.5


class DeliveryTraces:
    def __init__(self, tracing: Tracing, data: Path, has_agents: Callable[[], bool]) -> None:
        self.tracing = tracing
        self.data = Path(data)
        self.has_agents = has_agents  # nerve.yaml's agents, as now (a reload may add or remove them)
        self.after = 0  # the last delivery id read
        self.since_ms = int(time.time() * 1000)  # deliveries made before the engine started are not its to trace
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.tracing.keep_events = self.has_agents()
            if self.tracing.keep_events:
                await self.read(loop)
            await asyncio.sleep(POLL)

    async def read(self, loop: asyncio.AbstractEventLoop) -> None:
        open_ids = list(self.tracing.deliveries)
        records = await loop.run_in_executor(None, deliveries_since, self.data, self.after, open_ids)
        for record in records:
            self.after = max(self.after, record.id)
            if record.created_ms >= self.since_ms or record.id in self.tracing.deliveries:
                self.tracing.delivery(record)
