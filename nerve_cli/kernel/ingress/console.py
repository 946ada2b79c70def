"""`engine.ui`: an engine run as a service keeps the web console beside it, as its own process.

The console is `nerve ui --listen ADDR` (its own process, as ever: it reads the files and the control socket);
the engine starts it once it listens, says where (the address with its token, from data/ui.token), restarts
it when it dies (at most once a minute), and stops it (TERM, then KILL after 3 s) when the engine stops. A
change of `engine.ui` takes effect at the next start (the engine says so).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from nerve_cli.address import ListenAddress

RESTART_AFTER = 60.0
STOP_WAIT = 3.0


class Console:
    def __init__(self, home: Path, address: ListenAddress, report: Callable[[str, str], None]) -> None:
        self.home, self.address, self.report = Path(home), address, report
        self.process: asyncio.subprocess.Process | None = None
        self.url: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        while not self._stopping:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "nerve_cli", "ui", "--home", str(self.home), "--listen", str(self.address),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            assert self.process.stdout is not None
            async for raw in self.process.stdout:
                line = raw.decode(errors="replace").strip()
                if "token=" in line and self.url is None:
                    self.url = line.rsplit(" ", 1)[-1]
                    self.report("info", f"the console (engine.ui) on {self.url}")
                elif line:
                    self.report("warn", f"engine.ui: {line}")
            code = await self.process.wait()
            if self._stopping:
                return
            self.report("error", f"the console (engine.ui on {self.address}) exited ({code}); starting it again in "
                                 f"{RESTART_AFTER:g}s")
            await asyncio.sleep(RESTART_AFTER)

    async def close(self) -> None:
        self._stopping = True
        process = self.process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_WAIT)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._task is not None:
            self._task.cancel()


async def start_console(stack: AsyncExitStack, home: Path, address: ListenAddress | None,
                        report: Callable[[str, str], None]) -> Console | None:
    """The console beside the engine when `engine.ui` asks (None otherwise); closed when `stack` unwinds."""
    if address is None:
        return None
    console = Console(home, address, report)
    await console.start()
    stack.push_async_callback(console.close)
    return console
