"""The agents' tools of `nerve mcp`: a long poll on the caller's own agent inbox, and its acknowledgement.

For harnesses whose only channel to Nerve is MCP. `wait_for_events(agent,
timeout_s, match)` answers at once with the agent's pending delivery (handed
again, same id) or its oldest heard events, else waits until one of its
sources or its inbox commits (agents/shared.py: one poller on the server's
loop for every waiter, no socket and no thread held per waiter) or `timeout_s`
passes (`timed_out: true`). `match` narrows what this call takes on top of the
agent's own `match:`; what it leaves stays for other calls. Nothing is
acknowledged until `ack_events(agent, deliveries)`: a client that dies before
it saw an answer, or before it acknowledged, is handed the same delivery, with
the same id, by its next call.

No `from __future__ import annotations`: the SDK reads each tool's signature at registration.
"""

import asyncio
import os
import time
from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import Field

from nerve_cli.agents.shared import SharedWatch
from nerve_cli.agents.watch import Waiter
from nerve_cli.config.load import load_config
from nerve_cli.contract import agents as docs
from nerve_cli.home import Layout
from nerve_cli.store.inbox import Inbox, watched_paths

MAX_WAIT_S = 3600.0
LOOK_S = 5.0  # a waiter looks at the inbox at least this often, whatever its sources say

AgentName = Annotated[str, Field(description="the agent's name (agents: in nerve.yaml)")]
TimeoutS = Annotated[float, Field(ge=0, le=MAX_WAIT_S, description=(
    f"wait at most this many seconds for events (0: do not wait; at most {MAX_WAIT_S:g})"))]
Deliveries = Annotated[list[int] | None, Field(description=(
    "the delivery ids to acknowledge (wait_for_events' `delivery`); null: every pending one of the agent"))]


class AgentTools:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.data = Layout(self.home).data
        self.shared = SharedWatch()

    async def wait(self, agent: str, timeout_s: float, match: dict[str, Any] | None, session: str) -> dict[str, Any]:
        waiter = Waiter.of(self.data, load_config(self.home), agent)
        deadline = time.monotonic() + timeout_s
        inbox = await asyncio.to_thread(Inbox, self.data)
        try:
            while True:
                taken = await asyncio.to_thread(waiter.take, inbox, session=session, narrow=match or None, via="mcp")
                if taken.delivery is not None:
                    return docs.delivery(agent, taken.delivery, taken.acked)
                left = deadline - time.monotonic()
                if left <= 0:
                    return docs.delivery(agent, None, taken.acked, timed_out=True)
                await self.shared.wait_change(watched_paths(self.data, waiter.sources), min(left, LOOK_S))
        finally:
            await asyncio.to_thread(inbox.close)

    def ack(self, agent: str, deliveries: list[int] | None) -> dict[str, Any]:
        from nerve_cli.ops.agents import acknowledge  # the CLI's own acknowledgement (and its document)

        return acknowledge(self.home, agent, deliveries, by="mcp")


def session_of(ctx: Any) -> str:
    """Who takes the events: this server process and the client connection it serves."""
    return f"mcp:{os.getpid()}:{id(getattr(ctx, 'session', None))}"


def register(app: Any, home: Path, document: Callable[[str], Any], call: Callable[..., Any], act: Any,
             failed: Callable[[Exception], Any]) -> AgentTools:
    """Add the agents' tools to the server `app` (`document`, `call` and the annotations are server.py's)."""
    from mcp.server.mcpserver import Context  # this module is imported only by the server, with the SDK

    tools = AgentTools(home)

    @app.tool(title="Wait for an agent's events", annotations=act)
    async def wait_for_events(agent: AgentName, ctx: Context, timeout_s: TimeoutS = 60.0,
                              match: Annotated[dict[str, Any] | None, Field(description=(
                                  "only events whose payload has these values (a.b for nested keys; a list: any "
                                  "of its values), on top of the agent's own match"))] = None,
                              ) -> document("agent-delivery"):
        """Take the agent's events: its pending delivery again (same id), or its oldest new events as a new
        delivery, waiting up to timeout_s seconds for some to come (timed_out: true when none did). A delivery
        stays pending until ack_events acknowledges it: call ack_events once you have dealt with it."""
        try:
            found = await tools.wait(agent, timeout_s, match, session_of(ctx))
        except Exception as exc:  # every failure becomes the error document, for the model to read
            return failed(exc)
        return call(lambda: found)

    @app.tool(title="Acknowledge an agent's events", annotations=act)
    def ack_events(agent: AgentName, deliveries: Deliveries = None) -> document("agent-ack"):
        """Acknowledge deliveries wait_for_events handed out: their events never come back."""
        return call(tools.ack, agent, deliveries)

    return tools
