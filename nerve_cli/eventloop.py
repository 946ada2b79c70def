"""The event loop the kernel and its workers run on: uvloop when it can be imported, else asyncio's own.

uvloop (libuv) reads pipes and fires timers in C: the kernel pays less per
worker message and per timer, and a timer fires later by less
(LIBRARY-NOTES: pipe round trip 88 → ≈40 µs, `call_later` lateness p99 2.5 →
1.0 ms). It is imported only here, by the processes that run a loop, never by
`nerve --help`. `NERVE_LOOP=asyncio` asks for the stock loop (to rule uvloop
out when chasing a problem); without uvloop installed the stock loop is used
and nothing else changes.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

ENV = "NERVE_LOOP"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop when available (and not refused through NERVE_LOOP)."""
    factory = _uvloop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def _uvloop_factory() -> Any:
    if os.environ.get(ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """"uvloop" or "asyncio": what the running (or given) loop is."""
    loop = loop or asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
