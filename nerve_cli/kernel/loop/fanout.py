"""Fan-out: the events a compute emitted (`nerve_cli.sdk.emit`, committed with it), stored and routed like any emit.

The worker answers with the emits its compute committed (`store.fanout`); each
is stored in data/events.db through the emit desk (its listeners wake once it
is committed, as for `nerve emit`), one causal hop deeper than the compute, and
refused past the sense's causal depth bound (`kernel.core.causes`) or when its
channel is a sense's name. The key is the emitter's, or one made from the sense
and the row (`emit:SENSE:ID:TS`), so an answer handled twice stores it once.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import orjson

from nerve_cli.kernel.core.causes import Causes
from nerve_cli.kernel.core.emits import EmitDesk
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.loop.current import Current
from nerve_cli.store.events import EventError
from nerve_cli.vocab import logrows
from nerve_cli.vocab.sources import SourceKind


class FanOut:
    def __init__(self, current: Current, causes: Causes, emits: EmitDesk, log: Log, report: Report) -> None:
        self.current = current
        self.causes = causes
        self.emits = emits
        self.log = log
        self.report = report

    def deliver(self, sense: str, compute_id: int, emitted: list[dict[str, Any]]) -> None:
        """Store what compute `compute_id` of `sense` emitted (call while its cause is known: before it ends)."""
        cause = self.causes.compute(sense, compute_id)
        for item in emitted:
            channel, row = str(item.get("channel")), item.get("id")
            if self.current.config.source_kind(channel) is SourceKind.SENSE:
                self._refused(sense, channel, f"{channel!r} is a sense: senses emit their own signals; emit to a "
                                              "channel")
                continue
            caused = cause.hop(channel)
            if not self.causes.admit("emit", channel, caused, sense):
                continue
            payload = item.get("payload")
            key = item.get("key") or f"emit:{sense}:{row}:{item.get('ts', '')}"
            try:
                stored = self.emits.emit(channel, None if payload is None else orjson.Fragment(payload), key,
                                         cause=caused)
            except EventError as exc:
                self._refused(sense, channel, str(exc))
                continue
            stored.add_done_callback(functools.partial(self._stored, sense, channel))

    def _stored(self, sense: str, channel: str, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is not None:
            self._refused(sense, channel, str(done.exception()))

    def _refused(self, sense: str, channel: str, why: str) -> None:
        message = f"sense {sense}: emit to {channel} refused: {why}"
        self.log(logrows.error(sense, message, sense=sense, error_type="EventError", channel=channel))
        self.report("error", message)
