"""Many waiters on one event loop (the MCP server's long polls): one poller looks at every waiter's databases."""

from __future__ import annotations

import asyncio
from pathlib import Path

from nerve_cli.agents.watch import POLL, Watch


class SharedWatch:
    """One poller on an event loop for many waiters (the MCP server's): each waits on `changed()`."""

    def __init__(self) -> None:
        self._waiters: dict[int, tuple[Watch, asyncio.Event]] = {}
        self._task: asyncio.Task | None = None
        self._next = 0

    async def wait_change(self, paths: list[Path], timeout: float) -> bool:
        """True when one of `paths` committed within `timeout` seconds."""
        key = self._next = self._next + 1
        watch, event = Watch(paths), asyncio.Event()
        await asyncio.to_thread(watch.changed)
        self._waiters[key] = (watch, event)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self._waiters.pop(key, None)
            watch.close()

    async def _poll(self) -> None:
        while self._waiters:
            await asyncio.sleep(POLL)
            waiting = list(self._waiters.values())
            moved = await asyncio.to_thread(_look, [w for w, _ in waiting])
            for (_, event), changed in zip(waiting, moved):
                if changed:
                    event.set()


def _look(watches: list[Watch]) -> list[bool]:
    return [w.changed() for w in watches]
