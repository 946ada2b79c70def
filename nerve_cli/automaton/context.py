"""Which thread a role is running in: set by the workflow worker, read by helpers such as `llm_role`.

A role is called with the chain only; what it may also need — the
thread's id, its workflow's `model` and `system` from nerve.yaml, a place to
keep per-thread state such as a model conversation — travels in a context
variable, so each thread (an asyncio task in the worker) sees its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Halt:
    """A thread's cancel as its tool calls see it. They may run in threads of their own (a sync model's
    chain runs in one), which cancelling the thread's task does not stop: each call asks `begin` first, so
    none starts after the cancel, and the worker waits for those already running (`idle`) before it says
    the thread ended — a cancelled thread runs nothing after its cancel, and is not said stopped while a
    call it started still runs (the kernel's cancel_grace bounds the wait: then it stops the worker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._why: str | None = None
        self._running: dict[int, str] = {}  # a ticket → the tool's name
        self._tickets = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def cancel(self, why: str) -> None:
        with self._lock:
            self._why = self._why or why

    @property
    def cancelled(self) -> str | None:
        """Why the thread was cancelled; None while it was not."""
        return self._why

    def begin(self, name: str) -> int | None:
        """A ticket for a tool call about to run (hand it to `end`); None: the thread was cancelled, do not run."""
        with self._lock:
            if self._why is not None:
                return None
            self._tickets += 1
            self._running[self._tickets] = name
            return self._tickets

    def end(self, ticket: int) -> None:
        with self._lock:
            self._running.pop(ticket, None)
            wake = [] if self._running else self._waiters
            self._waiters = [] if not self._running else self._waiters
        for loop, future in wake:
            loop.call_soon_threadsafe(_settle, future)

    def running(self) -> list[str]:
        """The tool calls running now, by name."""
        with self._lock:
            return list(self._running.values())

    async def idle(self) -> None:
        """Return once no tool call of this thread runs."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if not self._running:
                return
            self._waiters.append((loop, future))
        await future


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass
class ThreadInfo:
    run_id: str
    workflow: str
    model: str | None = None  # workflows.<name>.model
    system: str | None = None  # workflows.<name>.system
    state: dict[str, Any] = field(default_factory=dict)  # per-thread scratch space of role helpers
    home: Path | None = None  # the instance folder (ready-made tools read its senses)
    # whether the role being called may stop the thread to wait (a tool call needing a person's approval):
    # not in the extra round that acts on the answer to a wait asked at the last round
    can_wait: bool = True
    # asks the kernel to store an event (channel, payload, key) → {"event_id", "duplicate", "triggered"}
    emit: Callable[[str, Any, str | None], Awaitable[dict[str, Any]]] | None = None
    halt: Halt = field(default_factory=Halt)  # its cancel, as the tool calls see it


_current: ContextVar[ThreadInfo | None] = ContextVar("nerve_thread", default=None)


def current_thread() -> ThreadInfo | None:
    """The thread the calling role runs in; None outside a workflow worker (e.g. a unit test)."""
    return _current.get()


def enter_thread(info: ThreadInfo) -> None:
    """Set for the calling task (each thread runs in its own task, so this never leaks across threads)."""
    _current.set(info)
