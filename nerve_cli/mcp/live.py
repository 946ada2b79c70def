"""Resource subscriptions for `nerve mcp`: a client is told when a sense signals or a thread starts waiting.

Both ways the protocol has: `resources/subscribe` (a client on the
handshake protocol, which is what MCP clients speak today) gets a
`notifications/resources/updated` for each URI it subscribed to, and a
`subscriptions/listen` stream (the 2026-07-28 protocol) gets the same
events through the SDK's bus, which keeps to the URIs the stream asked for.

While anyone is subscribed or listening, the URIs that concern them are
looked at every `POLL_S` (`resources.Fingerprints`: a few indexed reads, in a
thread), from the files: so it works with or without an engine, and whoever
wrote the signal or the thread's row (the engine, `nerve sense compute`,
`nerve thread approve`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from nerve_cli.home import Layout
from nerve_cli.mcp.resources import POLL_S, SENSES, WAITING, Fingerprints, sense_uri


class CountingBus(InMemorySubscriptionBus):
    """The SDK's in-process bus, counting the listen streams open (nothing is looked at while there are none)."""

    def __init__(self, opened: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.listeners = 0
        self.opened = opened  # a stream opens: what it may ask about is looked at now, so a change at once is news

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        self.listeners += 1
        self.opened()
        unsubscribe = super().subscribe(listener)
        done = False

        def once() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
                unsubscribe()

        return once


class Subscriptions:
    def __init__(self, home: Path) -> None:
        self.layout = Layout(Path(home))
        self.fingerprints = Fingerprints(home)
        # URI → the session to tell. `nerve mcp` serves one client (stdio), and the SDK hands each request a new
        # session object: keyed by the object, an unsubscribe never found the subscription it ends
        self.subscribed: dict[str, Any] = {}
        self.markers: dict[str, Any] = {}  # URI → its marker when last looked at
        self.bus = CountingBus(self._baseline)

    def attach(self, app: Any) -> None:
        """Serve `resources/subscribe` and `resources/unsubscribe` on `app` (an MCPServer)."""
        lowlevel = app._lowlevel_server  # the SDK registers no handler for them: MCPServer has no hook
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)

    async def _subscribe(self, ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        if uri not in self.markers:  # now, not at the next look: a change meanwhile is news
            self.markers[uri] = await anyio.to_thread.run_sync(self.fingerprints.marker, uri)
        self.subscribed[uri] = ctx.session
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        self.subscribed.pop(str(params.uri), None)
        return EmptyResult()

    def _baseline(self) -> None:
        """A listen stream opened: mark now what it may ask about, so a change before the next look is told (it
        was missed for up to POLL_S). On the loop: a few indexed reads per sense, once per stream."""
        for uri in self._everything() - set(self.markers):
            self.markers[uri] = self.fingerprints.marker(uri)

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as group:
            group.start_soon(self._watch)
            try:
                yield {}
            finally:
                group.cancel_scope.cancel()

    async def _watch(self) -> None:
        while True:
            await anyio.sleep(POLL_S)
            uris = set(self.subscribed)
            if self.bus.listeners:
                uris |= await anyio.to_thread.run_sync(self._everything)
            if not uris:
                continue
            now = await anyio.to_thread.run_sync(self._markers, uris)
            changed = [uri for uri in sorted(uris) if uri in self.markers and self.markers[uri] != now[uri]]
            self.markers = {**{u: m for u, m in self.markers.items() if u in uris}, **now}
            for uri in changed:
                await self._tell(uri)

    def _markers(self, uris: set[str]) -> dict[str, Any]:
        return {uri: self.fingerprints.marker(uri) for uri in uris}

    async def _tell(self, uri: str) -> None:
        session = self.subscribed.get(uri)
        if session is not None:
            try:
                await session.send_resource_updated(uri)
            except Exception:  # its client went away: forget it
                self.subscribed.pop(uri, None)
        await self.bus.publish(ResourceUpdated(uri=uri))

    def _everything(self) -> set[str]:
        """What a listen stream may have asked for: the lists and every sense that has a database."""
        folder = self.layout.sense_data
        names = [p.stem for p in folder.glob("*.db")] if folder.is_dir() else []
        return {SENSES, WAITING, *(sense_uri(n) for n in names)}
