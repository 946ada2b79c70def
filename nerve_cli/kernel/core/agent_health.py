"""Each agent's backlog, for the metrics: what waits in its inbox and its sources, read from the files.

The same counts `nerve agent list` shows (store.inbox.backlog: heard and not
handed, handed and not acknowledged, not yet heard), read in a thread and kept
for `TTL` seconds, so a scrape every few seconds costs one read.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from nerve_cli.config.agents import agent_sources
from nerve_cli.config.model import NerveConfig
from nerve_cli.home import Layout
from nerve_cli.store.inbox import AgentBacklog, backlog

TTL = 1.0


class AgentHealth:
    def __init__(self, home: Path) -> None:
        self.data = Layout(Path(home)).data
        self.last: dict[str, AgentBacklog] = {}
        self._at = 0.0
        self._reading: asyncio.Future | None = None

    async def refresh(self, config: NerveConfig) -> dict[str, AgentBacklog]:
        """The backlogs of nerve.yaml's agents, read at most `TTL` ago (one read at a time)."""
        if time.monotonic() - self._at < TTL and set(self.last) == set(config.agents):
            return self.last
        if self._reading is None:
            wanted = {name: (agent_sources(config, name), dict(agent.match)) for name, agent in config.agents.items()}
            self._reading = asyncio.get_running_loop().run_in_executor(None, self._read, wanted)
        reading = self._reading
        try:
            self.last = await asyncio.shield(reading)
            self._at = time.monotonic()
        finally:
            if self._reading is reading and reading.done():
                self._reading = None
        return self.last

    def _read(self, wanted: dict[str, tuple[dict[str, str], dict]]) -> dict[str, AgentBacklog]:
        return {name: backlog(self.data, name, sources, match) for name, (sources, match) in wanted.items()}
