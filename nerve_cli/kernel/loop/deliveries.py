"""The agents, as the running engine keeps them: each one's first look, and a `CodexDeliverer` per agent
with `deliver: {codex: ...}`.

The first look: an agent whose sources start `new` (the default) hears what they receive from its first look
on; the engine takes it for every enabled agent when it starts and when a reload adds one, so events that
reach the engine before any harness asked are the agent's.

`nerve agent deliver NAME` runs one in the foreground; a running engine runs
every configured one itself (and `nerve agent deliver` then refuses, so one
delivery never becomes two turns). The config in force is looked at when a hot
reload changes it (`Current.when_changed`), not on a timer (an engine with no
agents would wake for nothing every second): an agent added, removed, disabled
or pointed elsewhere has its deliverer started, stopped or started again. A
deliverer that stopped on an error is started again `RESTART_S` seconds later.
websockets is imported only once one is configured.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Callable

from nerve_cli.home import Layout
from nerve_cli.kernel.loop.current import Current

log = logging.getLogger(__name__)

RESTART_S = 1.0  # seconds before a deliverer that stopped on an error is started again


class CodexDeliveries:
    def __init__(self, home: Path, current: Current, report: Callable[[str, str], None]) -> None:
        self.data = Layout(Path(home)).data
        self.current, self.report = current, report
        self.running: dict[str, tuple[tuple[str, str], asyncio.Event, asyncio.Task]] = {}
        self.looked: set[str] = set()  # agents whose first look this engine took
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()  # set by a reload, or a deliverer's end: look again
        current.when_changed(self._wake.set)

    def wanted(self) -> dict[str, tuple[str, str]]:
        """agent → (endpoint, thread) of the enabled agents delivered to Codex."""
        out = {}
        for name, agent in self.current.config.agents.items():
            codex = agent.deliver.codex if agent.deliver is not None else None
            if agent.enabled and codex is not None:
                out[name] = (codex.endpoint, codex.thread)
        return out

    def start_into(self, stack: AsyncExitStack) -> None:
        """Start, and close with the engine's exit stack."""
        self.start()
        stack.push_async_callback(self.close)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        while True:
            self._wake.clear()
            await self.reconcile()
            await self._wake.wait()

    async def reconcile(self) -> None:
        new = [n for n, a in self.current.config.agents.items() if a.enabled and n not in self.looked]
        if new:
            try:
                await asyncio.to_thread(self._look, new)
            except Exception as exc:  # the inbox unreadable now (a damaged file is reported by whoever writes it)
                self.report("error", f"agents {', '.join(new)}: could not look at their sources: {exc}")
            else:
                self.looked.update(new)
        wanted = self.wanted()
        for name in [n for n, (where, _, _) in self.running.items() if wanted.get(n) != where]:
            await self._stop(name)
        for name, where in wanted.items():
            if name not in self.running:
                self._run(name, where)

    def _look(self, names: list[str]) -> None:
        from nerve_cli.config.agents import agent_sources  # (kept with _run: the agent side loads when there are agents)
        from nerve_cli.store.inbox import Inbox  # data/agents.db: opened only when there are agents

        config = self.current.config
        inbox = Inbox(self.data)
        try:
            for name in names:
                agent = config.agents[name]
                inbox.intake(name, agent_sources(config, name), agent.match, agent.start)
        finally:
            inbox.close()

    def _run(self, name: str, where: tuple[str, str]) -> None:
        from nerve_cli.agents.codex import CodexDeliverer  # websockets: only once an agent is delivered to Codex
        from nerve_cli.agents.watch import Waiter

        stop = asyncio.Event()
        deliverer = CodexDeliverer(self.data, lambda: Waiter.of(self.data, self.current.config, name), *where,
                                   report=self.report)
        task = asyncio.get_running_loop().create_task(deliverer.run(stop))
        task.add_done_callback(lambda done: self._ended(name, done))
        self.running[name] = (where, stop, task)
        self.report("info", f"agent {name}: delivering to codex thread {where[1]} at {where[0]}")

    def _ended(self, name: str, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        self.report("error", f"agent {name}: codex delivery stopped: {task.exception()}; started again")
        if self.running.get(name, (None, None, None))[2] is task:
            del self.running[name]  # the next look starts it again
            asyncio.get_running_loop().call_later(RESTART_S, self._wake.set)

    async def _stop(self, name: str) -> None:
        _, stop, task = self.running.pop(name)
        stop.set()
        try:
            await asyncio.wait_for(task, 10)
        except (asyncio.TimeoutError, Exception):  # it was told to stop; whatever it raised on the way is over
            task.cancel()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for name in list(self.running):
            await self._stop(name)
