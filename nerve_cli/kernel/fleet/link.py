"""The connection to the fleet's NATS servers, and the JetStream stream every host publishes into.

It connects in the background and never holds up the engine: it retries with
a growing pause (0.25 s doubling to 5 s) until a server answers. A lost
connection is never resumed: the link drops it and opens a new one. The NATS
client's own reconnection keeps the messages it had not yet written and
writes them after reconnecting, behind messages that were lost with the
socket; a fresh connection starts empty, so what a server stores from this
host is always a prefix of what was sent, and sending again from the first
unacknowledged message keeps every source in order.

Credentials come from the environment, under the NATS tools' own names
(NATS_USER and NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_NKEY; NATS_CA,
NATS_CERT and NATS_KEY for TLS), never from nerve.yaml, which is committed.

`ready` is set while a connection is up and the stream exists; the outbox and
inbox wait on it and watch `lost` (set when that connection goes). Changes of
state are logged once each (`fleet_connected`, `fleet_disconnected`), never
per retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import ssl
import time
from collections.abc import Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from nerve_cli.config.fleet import stream_subjects
from nerve_cli.config.model import FleetConfig
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.vocab import logrows

FIRST_RETRY = 0.25
MAX_RETRY = 5.0
CONNECT_TIMEOUT = 2.0
REQUEST_TIMEOUT = 5.0  # a JetStream API call, or a publish's acknowledgement
PING_INTERVAL = 5  # seconds between the client's pings: a silent dead peer is noticed within ~3 of them


def credentials(env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The nats.connect() keyword arguments the environment's NATS_* variables ask for."""
    out: dict[str, Any] = {}
    if env.get("NATS_USER"):
        out["user"], out["password"] = env["NATS_USER"], env.get("NATS_PASSWORD", "")
    if env.get("NATS_TOKEN"):
        out["token"] = env["NATS_TOKEN"]
    if env.get("NATS_CREDS"):
        out["user_credentials"] = env["NATS_CREDS"]
    if env.get("NATS_NKEY"):
        out["nkeys_seed"] = env["NATS_NKEY"]
    if env.get("NATS_CA") or env.get("NATS_CERT"):
        context = ssl.create_default_context(cafile=env.get("NATS_CA") or None)
        if env.get("NATS_CERT"):
            context.load_cert_chain(env["NATS_CERT"], env.get("NATS_KEY") or None)
        out["tls"] = context
    return out


class Link:
    def __init__(self, fleet: FleetConfig, host: str, log: Log, report: Report) -> None:
        self.fleet = fleet
        self.host = host
        self.log = log
        self.report = report
        self.nc: Client | None = None
        self.js: JetStreamContext | None = None
        self.ready = asyncio.Event()  # a connection is up and the stream exists
        self.lost = asyncio.Event()  # the current connection went (set until the next one is ready)
        self.lost.set()
        self.since = time.time()  # when the current state (connected or not) began
        self.server: str | None = None  # the URL connected to
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.connections = 0
        self._announced = False  # the current outage was reported
        self._closed = asyncio.Event()  # the current connection closed
        self._task: asyncio.Task | None = None
        self._closing = False

    @property
    def connected(self) -> bool:
        return self.ready.is_set()

    @property
    def max_payload(self) -> int:
        return self.nc.max_payload if self.nc is not None else 1024 * 1024

    def start(self) -> None:
        user = os.environ.get("NATS_USER")
        if user and user != self.host:  # deploy/nats-server.conf lets a user publish under its own name only
            self.report("warn", f"fleet: NATS_USER is {user!r} but this host is {self.host!r}: with a user per host "
                                "(deploy/nats-server.conf), the server refuses what this host publishes under its name")
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        """Connect, set up the stream, wait for the connection to go; again, for as long as the engine runs."""
        pause = FIRST_RETRY
        while not self._closing:
            if await self._connect():
                pause = FIRST_RETRY
                await self._closed.wait()
                self._down("the connection to the NATS server was lost")
                continue
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_RETRY)

    async def _connect(self) -> bool:
        self._closed = asyncio.Event()
        closed = self._closed

        async def on_closed() -> None:
            closed.set()

        async def on_error(exc: Exception) -> None:
            self._error(exc, "connection error")

        try:
            nc = await nats.connect(
                servers=list(self.fleet.servers), name=f"nerve {self.host}", allow_reconnect=False,
                max_reconnect_attempts=1, reconnect_time_wait=FIRST_RETRY,  # each server twice, then our own pause
                connect_timeout=CONNECT_TIMEOUT, ping_interval=PING_INTERVAL, error_cb=on_error,
                closed_cb=on_closed, disconnected_cb=on_closed, **credentials())
        except Exception as exc:  # refused, timed out, bad credentials: said once per outage, tried again
            self._down(self._error(exc, "could not connect"))
            return False
        self.nc, self.js = nc, nc.jetstream(timeout=REQUEST_TIMEOUT)
        try:
            await self.ensure_stream()
        except Exception as exc:  # JetStream not ready yet after a server restart, or refused
            self._down(self._error(exc, "could not set up the stream"))
            await self._drop(nc)
            return False
        self.server = nc.connected_url.geturl() if nc.connected_url else None
        self.since, self._announced = time.time(), False
        self.connections += 1
        self.lost.clear()
        self.ready.set()
        self.log(logrows.fleet_connected(self.host, self.server, self.fleet.stream))
        self.report("info", f"fleet: connected to {self.server} as host {self.host}")
        return True

    async def ensure_stream(self) -> None:
        """The fleet's stream, bounded in age, bytes and messages as nerve.yaml says (the oldest go first); an
        existing stream whose bounds differ is updated to them, and says so (every host should say the same)."""
        assert self.js is not None
        name = self.fleet.stream
        limits: dict[str, Any] = {"max_age": self.fleet.retention, "max_bytes": self.fleet.max_bytes,
                                  "max_msgs": self.fleet.max_messages}
        try:
            info = await self.js.stream_info(name)
        except NotFoundError:
            await self.js.add_stream(StreamConfig(
                name=name, subjects=stream_subjects(name), num_replicas=self.fleet.replicas, storage=StorageType.FILE,
                discard=DiscardPolicy.OLD, description="Nerve fleet: the signals and emits its hosts publish",
                **limits))
            self.report("info", f"fleet: created stream {name} (subjects {name}.>)")
            return
        have = {key: getattr(info.config, key) for key in limits}
        if any(have[key] != value for key, value in limits.items()):
            await self.js.update_stream(dataclasses.replace(info.config, **limits))
            self.log(logrows.warning("fleet", f"stream {name}: its bounds were {have}, now {limits} (nerve.yaml's "
                                              "fleet.retention, max_bytes, max_messages: give every host the same)"))
            self.report("info", f"fleet: stream {name} bounds updated to {limits}")

    def trouble(self, exc: BaseException | str, doing: str) -> None:
        """The outbox or inbox failed talking to NATS: drop this connection and start a fresh one."""
        self._error(exc, doing)
        nc = self.nc
        if nc is not None and self.ready.is_set():
            self._down(self.last_error or doing)
            asyncio.get_running_loop().create_task(self._drop(nc))

    def _error(self, exc: BaseException | str, doing: str) -> str:
        text = exc if isinstance(exc, str) else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        self.last_error, self.last_error_at = f"{doing}: {text}", time.time()
        return self.last_error

    def _down(self, why: str) -> None:
        if self.ready.is_set():
            self.since = time.time()
        self.ready.clear()
        self.lost.set()
        if not self._announced and not self._closing:
            self._announced = True
            self.log(logrows.fleet_disconnected(self.host, why))
            self.report("warn", f"fleet: {why}; local work goes on, what is published waits in the outbox")

    async def _drop(self, nc: Client) -> None:
        if not nc.is_closed:
            try:
                await asyncio.wait_for(nc.close(), 2.0)
            except Exception:  # a connection that is going away anyway: nothing of ours is left in it
                pass
        if nc is self.nc:
            self._closed.set()

    async def close(self) -> None:
        self._closing = True
        self.ready.clear()
        self.lost.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.nc is not None:
            await self._drop(self.nc)


async def first_of(*aws: Any) -> None:
    """Wait until the first of these is done; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
