"""Which thread a role is running in: set by the workflow worker, read by helpers such as `llm_role`.

A role is called with the chain only; what it may also need — the
thread's id, its workflow's `model` and `system` from nerve.yaml, a place to
keep per-thread state such as a model conversation — travels in a context
variable, so each thread (an asyncio task in the worker) sees its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


_current: ContextVar[ThreadInfo | None] = ContextVar("nerve_thread", default=None)


def current_thread() -> ThreadInfo | None:
    """The thread the calling role runs in; None outside a workflow worker (e.g. a unit test)."""
    return _current.get()


def enter_thread(info: ThreadInfo) -> None:
    """Set for the calling task (each thread runs in its own task, so this never leaks across threads)."""
    _current.set(info)
