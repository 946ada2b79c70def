"""Who waits for a compute of a sense, and, for a sense with parameters, with which values.

A person's compute (`nerve sense compute`, `demand`) and a read that brings a
lazy sense up to date (`read`) both wait for *a compute started after they
asked* to end. A sense whose reflexes bind parameters computes one set of
values at a time: its next compute takes the values of the oldest waiter, and
ends the wait of every waiter with the same values; the others wait for the
next one, which the engine asks for at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nerve_cli.names import binding_key
from nerve_cli.vocab.outcomes import Outcome


@dataclass
class _Waiter:
    after: int  # the first compute id that can answer it (the next one when it asked)
    bind: dict[str, Any] | None
    binding: str | None
    future: asyncio.Future


MAX_READ_COMPUTES = 100  # batches one read may take to catch up (each at most worker.events.MAX_EVENTS events)


async def catch_up(waiting: Callable[[], Awaitable[bool]], compute: Callable[[], Awaitable[dict[str, Any]]]
                   ) -> dict[str, Any]:
    """Compute while events wait (each compute reads at most a batch): {computes, events, error, more}."""
    answer: dict[str, Any] = {"computes": 0, "events": 0, "error": None, "more": False}
    for _ in range(MAX_READ_COMPUTES):
        if not await waiting():
            return answer
        result = await compute()
        answer["computes"] += 1
        answer["events"] += result.get("events", 0)
        if result.get("outcome") not in (Outcome.SIGNAL, Outcome.SILENT):
            answer["error"] = result.get("error") or {"type": "Error", "message": f"compute {result.get('outcome')}",
                                                      "traceback": "", "file": None, "line": None}
            return answer
    return {**answer, "more": True}


class Reads:
    def __init__(self) -> None:
        self._waiting: dict[str, list[_Waiter]] = {}

    def add(self, sense: str, after: int, bind: dict[str, Any] | None, future: asyncio.Future) -> None:
        self._waiting.setdefault(sense, []).append(_Waiter(after, bind or None, binding_key(bind), future))

    def waiting(self, sense: str) -> bool:
        """Whether anyone waits for a compute of `sense`."""
        return bool(self._waiting.get(sense))

    def next_bind(self, sense: str) -> dict[str, Any] | None:
        """The values the next compute of `sense` reads with: the oldest waiter's (None when unbound)."""
        waiting = self._waiting.get(sense)
        return waiting[0].bind if waiting else None

    def ended(self, sense: str, compute_id: int, binding: str | None, answer: dict[str, Any]) -> bool:
        """Compute `compute_id` (of `binding`'s values) ended: answer whoever it answers. True when others
        still wait (the caller asks for one more compute: coalesced with one already pending)."""
        left = []
        for waiter in self._waiting.pop(sense, []):
            if compute_id >= waiter.after and waiter.binding == binding:
                if not waiter.future.done():
                    waiter.future.set_result(answer)
            elif not waiter.future.done():
                left.append(waiter)
        if left:
            self._waiting[sense] = left
        return bool(left)
