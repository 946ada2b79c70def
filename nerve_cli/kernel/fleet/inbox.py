"""Receiving from the fleet: one durable JetStream consumer per subscription, committed here before it is acked.

Each subscription (another host's sense, or a fleet channel) has its own
durable pull consumer, named after this host and the subject, so the server
remembers how far this host got even while its engine is stopped, and each
subscription's lag can be read on its own. Messages are committed into
`data/events.db` through the engine's emit desk, keyed `fleet:<message id>`,
and acknowledged only after that commit: a crash between the two hands them
over again and the key drops the copy (the emit answers `duplicate`, waking
no one).

Order: a consumer hands messages over in stream order, but a message handed
to a connection that then died comes back only after `ack_wait`, behind newer
ones. So on every new connection (and after a failed commit) a consumer that
still has unacknowledged messages is re-created to start right after its
acknowledged floor: everything not yet acknowledged comes again, in order,
and what was already committed is dropped by its key.

The pull loop keeps one pull request open (a batch of up to `BATCH`, expiring
after `EXPIRES`) and commits whatever has arrived each time it wakes, so a
quiet subscription costs one request per `EXPIRES` and a busy one commits in
batches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from nerve_cli.config.fleet import KEY_PREFIX, subscriptions
from nerve_cli.config.model import FleetConfig
from nerve_cli.kernel.core.causes import Cause, Causes
from nerve_cli.kernel.core.emits import Event
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.fleet.link import FIRST_RETRY, MAX_RETRY, Link, first_of
from nerve_cli.names import traceparent_problem
from nerve_cli.vocab import logrows
from nerve_cli.vocab.sources import SourceKind

BATCH = 256
EXPIRES = 5.0  # seconds a pull request waits on the server
LAG_EVERY = 2.0  # seconds between two reads of each consumer's lag

# Stores events in order; one future per event, resolved once committed
Deliver = Callable[[list[Event]], list[asyncio.Future]]  # (channel, payload, key, origin host, traceparent)


class CommitFailed(Exception):
    """The local event store refused a batch: nothing of it is acknowledged."""


@dataclass
class Subscription:
    source: str  # the local source name: build-box/disk-usage, or the channel
    subject: str
    kind: str  # "sense" | "channel"
    durable: str
    received: int = 0  # events committed here
    duplicates: int = 0  # handed over again and dropped by their key
    refused: int = 0  # past the causal depth bound: acknowledged, not stored
    lag: int | None = None  # messages the server holds for this host and has not had acknowledged
    last_at: float | None = None  # when the last event was committed here
    last_origin_ts: int | None = None  # that event's time on its host (unix ms)
    last_host: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "subject": self.subject, "consumer": self.durable,
                "received": self.received, "duplicates": self.duplicates, "lag": self.lag,
                "last_event_at": self.last_at, "last_origin_ts": self.last_origin_ts, "last_host": self.last_host}


def durable_name(host: str, subject: str) -> str:
    """A consumer name per (host, subject): readable, and within the server's rules (no '.', '*', '>')."""
    digest = hashlib.sha1(subject.encode()).hexdigest()[:10]
    return f"nerve_{host}_{digest}"


class Inbox:
    def __init__(self, fleet: FleetConfig, host: str, link: Link, deliver: Deliver, log: Log, report: Report,
                 causes: Causes | None = None) -> None:
        self.fleet = fleet
        self.causes = causes  # what comes in keeps the causal depth it was sent with, and is refused past the bound
        self.host = host
        self.link = link
        self.deliver = deliver
        self.log = log
        self.report = report
        self.subs = {source: Subscription(source, subject, "channel" if source in fleet.subscribe.channels else "sense",
                                          durable_name(host, subject))
                     for source, subject in subscriptions(fleet).items()}
        self.hosts: dict[str, dict[str, Any]] = {}  # origin host → {"last_at", "source", "events"}
        self.not_json = 0
        self.forged = 0  # messages whose Nerve-Host header names another host than their subject
        self._forgers: set[tuple[str, str, str]] = set()  # (subject's host, header's host, source): said once

    async def run(self) -> None:
        await asyncio.gather(*(self._consume(sub) for sub in self.subs.values()), self._watch_lag(),
                             self._forget_removed())

    async def _forget_removed(self) -> None:
        """Delete this host's consumers no subscription names any more (a subscription removed from nerve.yaml):
        the server kept them, and the messages they held, for ever. Once per connection."""
        mine = {sub.durable for sub in self.subs.values()}
        while True:
            await self.link.ready.wait()
            js = self.link.js
            if js is not None:
                try:
                    names = [c.name for c in await js.consumers_info(self.fleet.stream)]
                    for name in names:
                        if name.startswith(f"nerve_{self.host}_") and name not in mine:
                            await js.delete_consumer(self.fleet.stream, name)
                            self.log(logrows.warning("fleet", f"deleted consumer {name} of stream "
                                                              f"{self.fleet.stream}: no subscription of host "
                                                              f"{self.host} uses it any more"))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the connection is going, or the server refused: the next one tries
                    self.report("warn", f"fleet: could not look for unused consumers: {exc}")
            await self.link.lost.wait()

    async def _consume(self, sub: Subscription) -> None:
        pause = FIRST_RETRY
        while True:
            await self.link.ready.wait()
            nc, js = self.link.nc, self.link.js
            if nc is None or js is None:
                await self.link.lost.wait()
                continue
            try:
                await self._prepare(js, sub)
                await self._pull(nc, sub)
                pause = FIRST_RETRY
            except CommitFailed as exc:  # this disk, not NATS: wait, then take the same messages again
                self.report("error", f"fleet: {exc}; trying again in {pause:g}s")
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # NATS refused or went away: a fresh connection, then start over
                self.link.trouble(exc, f"could not receive {sub.source}")
                await self.link.lost.wait()

    async def _prepare(self, js: JetStreamContext, sub: Subscription) -> None:
        """Create the consumer, or re-create it right after its acknowledged floor when it has messages out."""
        stream = self.fleet.stream
        config = ConsumerConfig(durable_name=sub.durable, description=f"nerve host {self.host}: {sub.source}",
                                filter_subject=sub.subject, ack_policy=AckPolicy.EXPLICIT,
                                ack_wait=self.fleet.ack_wait, deliver_policy=DeliverPolicy.ALL,
                                max_ack_pending=4 * BATCH)
        try:
            info = await js.consumer_info(stream, sub.durable)
        except NotFoundError:
            await js.add_consumer(stream, config)
            return
        same = info.config.filter_subject == sub.subject and info.config.ack_wait == self.fleet.ack_wait
        if same and not info.num_ack_pending:
            return
        start = (info.ack_floor.stream_seq if info.ack_floor is not None else 0) + 1
        await js.delete_consumer(stream, sub.durable)
        await js.add_consumer(stream, dataclasses.replace(config, deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                          opt_start_seq=start))

    async def _pull(self, nc: Client, sub: Subscription) -> None:
        """Until the connection goes: keep a pull request open, commit and acknowledge what arrives."""
        arrived: list[Msg] = []
        wake = asyncio.Event()

        async def on_message(msg: Msg) -> None:
            arrived.append(msg)
            wake.set()

        inbox = nc.new_inbox()
        subscription = await nc.subscribe(inbox, cb=on_message, pending_msgs_limit=4 * BATCH)
        request = f"$JS.API.CONSUMER.MSG.NEXT.{self.fleet.stream}.{sub.durable}"
        body = orjson.dumps({"batch": BATCH, "expires": int(EXPIRES * 1e9)})
        left = 0  # messages the open request may still bring
        try:
            while not self.link.lost.is_set():
                if left <= 0:
                    await nc.publish(request, body, reply=inbox)
                    left = BATCH
                await first_of(wake.wait(), self.link.lost.wait())
                wake.clear()
                chunk, arrived[:] = arrived[:], []
                messages = []
                for msg in chunk:
                    status = msg.headers.get("Status") if msg.headers else None
                    if status is None and msg.reply:
                        messages.append(msg)
                        left -= 1
                    elif status == "409" and "deleted" in (msg.headers or {}).get("Description", "").lower():
                        raise RuntimeError("the consumer was deleted on the server")
                    elif status != "100":  # 404/408: the request ended; 409: it was refused; 100: a heartbeat
                        left = 0
                if messages:
                    await self._commit(sub, messages)
        finally:
            try:
                await subscription.unsubscribe()
            except Exception:  # the connection is gone with it
                pass

    async def _commit(self, sub: Subscription, messages: list[Msg]) -> None:
        items: list[Event] = []
        kept: list[Msg] = []
        for msg in messages:
            headers = msg.headers or {}
            # the subject names the host that published (the server lets a host publish only under its own
            # name: deploy/nats-server.conf); a header that names another is a forgery, not an origin
            origin = _host_of(msg.subject) or headers.get("Nerve-Host")
            claimed = headers.get("Nerve-Host")
            if claimed is not None and origin is not None and claimed != origin:
                self._forged(sub, origin, claimed)
                continue
            if sub.kind == SourceKind.CHANNEL and origin == self.host:
                continue  # this host's own emit: it is already here
            cause = _cause(headers, origin)
            if cause is not None and self.causes is not None and not self.causes.admit_into("emit", sub.source, cause):
                sub.refused += 1  # a chain of echoes between hosts: stopped here (acknowledged, not stored)
                continue
            msg_id = headers.get("Nats-Msg-Id") or f"{self.fleet.stream}.{msg.metadata.sequence.stream}"
            items.append((sub.source, self._payload(msg), KEY_PREFIX + msg_id, origin, _traceparent(headers), cause))
            kept.append(msg)
        if items:
            try:
                results = await asyncio.gather(*self.deliver(items))
            except Exception as exc:
                raise CommitFailed(f"could not store {len(items)} event(s) received for {sub.source}: {exc}") from None
            now = time.time()
            for (event, _woken), msg in zip(results, kept):
                origin = event.origin
                if event.duplicate:
                    sub.duplicates += 1
                    continue
                sub.received += 1
                sub.last_at, sub.last_host = now, origin
                ts = (msg.headers or {}).get("Nerve-Ts")
                sub.last_origin_ts = int(ts) if ts and ts.isdigit() else None
                seen = self.hosts.setdefault(origin or "?", {"events": 0})
                seen.update(last_at=now, source=sub.source, events=seen["events"] + 1)
        for msg in messages:
            await msg.ack()

    def _forged(self, sub: Subscription, origin: str, claimed: str) -> None:
        self.forged += 1
        if (origin, claimed, sub.source) not in self._forgers:
            self._forgers.add((origin, claimed, sub.source))
            warning = (f"fleet: a message for {sub.source} on {origin}'s subject says it is from {claimed}: "
                       "refused, not stored (give each host its own NATS user: deploy/nats-server.conf)")
            self.log(logrows.warning("fleet", warning))
            self.report("warn", warning)

    def _payload(self, msg: Msg) -> Any:
        """The event's payload: JSON as sent by a Nerve host; anything else (a message from another publisher)
        arrives as its text."""
        if not msg.data:
            return None
        try:
            return orjson.loads(msg.data)
        except orjson.JSONDecodeError:
            self.not_json += 1
            return msg.data.decode("utf-8", "replace")

    async def _watch_lag(self) -> None:
        """Each consumer's lag, read every LAG_EVERY while connected (status and metrics show it)."""
        while True:
            await self.link.ready.wait()
            js = self.link.js
            for sub in list(self.subs.values()):
                try:
                    info = await js.consumer_info(self.fleet.stream, sub.durable) if js is not None else None
                except Exception:  # not created yet, or the connection is going: the next round reads it
                    continue
                if info is not None:
                    sub.lag = (info.num_pending or 0) + (info.num_ack_pending or 0)
            await asyncio.sleep(LAG_EVERY)


def _cause(headers: dict[str, str], origin: str | None) -> Cause | None:
    """The causal depth and path a Nerve host sent the message with (Nerve-Depth, Nerve-Path), through here."""
    depth = headers.get("Nerve-Depth")
    if depth is None or not depth.isdigit():
        return None
    try:
        path = [str(p) for p in orjson.loads(headers.get("Nerve-Path") or "[]")]
    except (orjson.JSONDecodeError, TypeError):
        path = []
    return Cause(int(depth), (*path, f"fleet from {origin or '?'}"))


def _traceparent(headers: dict[str, str]) -> str | None:
    """The W3C trace context a message carries, when it is one (anything else is ignored)."""
    value = headers.get("traceparent")
    return value if value is not None and traceparent_problem(value) is None else None


def _host_of(subject: str) -> str | None:
    """The publishing host of a message that carries no Nerve headers: the subject's third part."""
    parts = subject.split(".")
    return parts[2] if len(parts) > 3 else None
