"""How many connections a server of the engine holds at once, and when reaching the cap is news.

The control socket and the metrics server both answer a connection past their
cap at once and close it (it must not hold a file descriptor), and say so once
per siege: again only after the count fell to half the cap.
"""

from __future__ import annotations

import asyncio
from typing import Callable

OnBusy = Callable[[int, int], None]  # (connections open, the cap): once each time the cap is reached


class ConnectionCap:
    def __init__(self, limit: int, on_busy: OnBusy | None = None) -> None:
        self.limit = limit
        self.open = 0
        self.on_busy = on_busy
        self._reported = False

    def admit(self) -> bool:
        """Count a new connection in; False when the cap is reached (refuse it)."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open -= 1
        if self.open <= self.limit // 2:
            self._reported = False  # the next time the cap is reached is news again

    def refuse(self, writer: asyncio.StreamWriter, answer: bytes) -> None:
        """Write a few bytes (into an empty buffer: never blocks), close, and report the siege once."""
        try:
            writer.write(answer)
        except (ConnectionError, OSError):
            pass
        writer.close()
        if not self._reported and self.on_busy is not None:
            self._reported = True
            self.on_busy(self.open, self.limit)
