"""This host in its fleet: the NATS link, the outbox and the inbox, run beside the engine and never in its way.

The engine pokes `committed()` when a signal or an emit is committed here (a
set insertion; the outbox sends it when it can) and hands over its emit desk
as `deliver`, through which received events are committed like any emit. It
never awaits anything here to schedule local work: with NATS down, computes,
signals and emits go on, the outbox grows, and `status()` says so.

Each part runs as a task that is restarted (after a pause, with an error
logged) should it ever fail, so a bug in one never stops the others or the
engine.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Coroutine

import orjson

from nerve_cli.config.model import FleetConfig
from nerve_cli.kernel.core.causes import Causes
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.fleet.inbox import Deliver, Inbox
from nerve_cli.kernel.fleet.link import MAX_RETRY, Link
from nerve_cli.kernel.fleet.outbox import Outbox
from nerve_cli.store.fleet import OutboxStore, Row
from nerve_cli.vocab import logrows
from nerve_cli.vocab.sources import SourceKind


class Fleet:
    def __init__(self, config: FleetConfig, data: Path, deliver: Deliver, log: Log, report: Report,
                 traceparent: Callable[[str], str | None] | None = None, causes: Causes | None = None) -> None:
        """`traceparent`: the trace context of a source's latest event, when the engine traces (sent along);
        `causes`: the causal depth of each source's latest item (sent along, and the bound of what comes in)."""
        self.config = config
        self.host = config.host_name
        self.log = log
        self.report = report
        self.traceparent = traceparent
        self.link = Link(config, self.host, log, report)
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleet")
        self.store = OutboxStore(data)
        self.outbox = Outbox(config, self.host, self.link, self.store, self.thread, log, report,
                             causes.latest.get if causes is not None else None)
        self.inbox = Inbox(config, self.host, self.link, deliver, log, report, causes)
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self.link.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._keep("outbox", self.outbox.run)),
                       loop.create_task(self._keep("inbox", self.inbox.run))]

    async def _keep(self, part: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        while True:
            try:
                await run()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not stop the rest of the fleet, nor the engine
                self.log(logrows.error("fleet", f"fleet {part} failed: {type(exc).__name__}: {exc}",
                                       error_type=type(exc).__name__))
                self.report("error", f"fleet: the {part} failed ({type(exc).__name__}: {exc}); "
                                     f"restarting it in {MAX_RETRY:g}s")
                await asyncio.sleep(MAX_RETRY)

    def committed(self, kind: str, name: str, row_id: int | None = None, ts: int | None = None,
                  payload: Any = None) -> None:
        """A signal of sense `name` or an emit on channel `name` was committed here: its row id, time and payload
        (a value, or an orjson.Fragment of its JSON) when the kernel has them at hand."""
        if (kind, name) not in self.outbox.subjects:
            return
        trace = self.traceparent(name) if self.traceparent is not None else None
        row = None if row_id is None or ts is None else Row(row_id, ts, None if payload is None else orjson.dumps(
            payload, option=orjson.OPT_NON_STR_KEYS), trace)
        self.outbox.poke(kind, name, row)

    def committed_offline(self, channel: str | None) -> None:
        """Emits were stored without the engine (on `channel`, or any): look at the published channels again."""
        for kind, name in self.outbox.subjects:
            if kind == SourceKind.CHANNEL and channel in (None, name):
                self.outbox.poke(kind, name)

    def status(self) -> dict[str, Any]:
        link, outbox = self.link, self.outbox
        return {
            "host": self.host, "servers": list(self.config.servers), "stream": self.config.stream,
            "connected": link.connected, "server": link.server if link.connected else None,
            "since": link.since, "last_error": link.last_error, "last_error_at": link.last_error_at,
            "connections": link.connections,
            "outbox": outbox.depth, "published": outbox.published, "not_sent": outbox.too_large,
            "publishes": [{"kind": k, "name": n, "subject": subject,
                           "sent_id": mark.last_id if (mark := outbox.sent.get((k, n))) is not None else None}
                          for (k, n), subject in sorted(outbox.subjects.items())],
            "subscriptions": [s.describe() for _, s in sorted(self.inbox.subs.items())],
            "hosts": {h: dict(v) for h, v in sorted(self.inbox.hosts.items())},
            "not_json": self.inbox.not_json,
        }

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.link.close()
        await asyncio.get_running_loop().run_in_executor(self.thread, self.store.close)
        self.thread.shutdown(wait=True)
