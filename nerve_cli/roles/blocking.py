"""Blocking calls made from a role's asyncio task without holding up the worker."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

T = TypeVar("T")


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """`await asyncio.to_thread(call)`, but in a daemon thread of its own, not the loop's executor.

    A model call that never returns (a provider gone silent) cannot be stopped once its thread runs:
    role_timeout abandons it. In the default executor it would hold up the worker's exit (asyncio.run
    and the interpreter both wait for executor threads), and stay counted in the executor's few slots.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # cancelled by role_timeout meanwhile: nobody waits for it
            outcome()

    def run() -> None:
        try:
            result = context.run(call)
        except BaseException as exc:  # handed to the awaiting role, as to_thread would
            answer = partial(settle, partial(done.set_exception, exc))
        else:
            answer = partial(settle, partial(done.set_result, result))
        try:
            loop.call_soon_threadsafe(answer)
        except RuntimeError:  # the loop is closed: the worker is ending and nobody waits
            pass

    threading.Thread(target=run, name="llm-call", daemon=True).start()
    return await done
