"""The built-in senses as a group: nerve-health and nerve-threads compute in the kernel, and answer as a
worker's group does.

The pump hands them a start like any other; each builds its rows on the loop,
writes them in a thread, and answers through the same hooks a worker's
supervisor calls (`compute_answered`): a `Signalled` with the signals it
committed, `Silent` when nothing changed, `Error` when its database refused
the write. Their databases open with the engine and close after the last
write under way ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nerve_cli.config.model import THREADS_SENSE
from nerve_cli.kernel.control.health import HEALTH_SENSE, HealthStore
from nerve_cli.kernel.control.threads_sense import ThreadsStore
from nerve_cli.kernel.core.causes import Cause
from nerve_cli.kernel.loop.pump import KERNEL
from nerve_cli.kernel.supervision.supervisor import GroupHooks, Inflight
from nerve_cli.vocab.reasons import Reason
from nerve_cli.wire import protocol


@dataclass(frozen=True)
class Signalled(protocol.Message):
    """A built-in sense's compute committed `signals` [(signal id or None, payload, ts or None)], in order;
    `signal_id` is the last one's (its run_complete row's); `more`: transitions beyond this batch wait."""

    type: ClassVar[str] = "signalled"
    id: int
    sense: str
    duration_ms: float
    signals: list[tuple[int | None, Any, int | None]]
    signal_id: int | None
    more: bool = False
    causes: list[Cause] | None = None  # each signal's causal depth and path, when it has its own (nerve-threads')


class Builtins:
    senses = frozenset({HEALTH_SENSE, THREADS_SENSE})

    def __init__(self, health: HealthStore, threads: ThreadsStore, health_payload: Callable[[], dict[str, Any]],
                 path: Callable[[str], Path]) -> None:
        self.health = health
        self.threads = threads
        self.hooks: GroupHooks  # who hears their answers (set by the part that answers them, before any start)
        self.health_payload = health_payload  # what the engine knows about itself, built on the loop
        self.path = path  # a sense's database, for the error that names it
        self._writes: set[asyncio.Future] = set()  # the rows being written

    def compute(self, compute_id: int, sense: str, reason: Reason) -> None:
        inflight = Inflight(compute_id, sense, reason, time.time())
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        write: asyncio.Future
        if sense == HEALTH_SENSE:
            payload = self.health_payload()
            write = loop.run_in_executor(None, self.health.record, payload)
            write.add_done_callback(lambda f: self._health_stored(f, inflight, payload, started))
        else:
            write = loop.run_in_executor(None, self.threads.take)
            write.add_done_callback(lambda f: self._threads_stored(f, inflight, started))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def close(self) -> None:
        """Wait for the writes under way (their rows and run_complete); the engine closes the databases."""
        if self._writes:
            await asyncio.wait(list(self._writes))

    def _health_stored(self, stored: asyncio.Future, inflight: Inflight, payload: dict, started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        if stored.exception() is not None:
            self._refused(inflight, stored.exception(), duration, "signal")
            return
        # (routed without its id: its listeners read it by theirs)
        self._answer(inflight, Signalled(inflight.id, HEALTH_SENSE, duration, [(None, payload, None)],
                                         stored.result()))

    def _threads_stored(self, done: asyncio.Future, inflight: Inflight, started: float) -> None:
        duration = (time.perf_counter() - started) * 1000
        if done.exception() is not None:
            self._refused(inflight, done.exception(), duration, "signals")
            return
        signals, more, paths = done.result()
        if not signals:
            self._answer(inflight, protocol.Silent(id=inflight.id, sense=THREADS_SENSE, duration_ms=duration))
            return
        # one signal per transition, as deep as its thread made it; the listeners read them all by id
        causes = [Cause(body["depth"], tuple(path) if path else (body["run_id"], THREADS_SENSE))
                  for (_, body), path in zip(signals, paths)]
        self._answer(inflight, Signalled(inflight.id, THREADS_SENSE, duration,
                                         [(signal_id, body, body["at_ms"]) for signal_id, body in signals],
                                         signals[-1][0], more, causes))

    def _refused(self, inflight: Inflight, error: BaseException | None, duration: float, what: str) -> None:
        info = protocol.ErrorInfo(type(error).__name__,
                                  f"could not store its {what} in {self.path(inflight.sense)}: {error}")
        self._answer(inflight, protocol.Error(id=inflight.id, sense=inflight.sense, error=info, duration_ms=duration))

    def _answer(self, inflight: Inflight, message: protocol.Message) -> None:
        self.hooks.compute_answered(KERNEL, inflight, message)
