"""A queue by priority with ageing: higher first, FIFO within a level, and low work always progresses.

Each item's key is fixed when it joins: `joined - rank × ageing` (rank: low 0, normal 1, high 2, urgent 3),
the smallest first. So an item is passed only by items that joined less than (their rank − its rank) ×
`ageing` after it: nothing that joins more than 3 × `ageing` after a `low` item starts before it, and
within one level the order is arrival order. The keys never change, so the queue is a plain heap
(O(log n) a push or pop) and needs no re-sorting as items age. An item put back at the front (a thread
resumed by its answer, which had its turn) goes before everything.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from nerve_cli.config.model import PRIORITIES

T = TypeVar("T")
RANK = {name: rank for rank, name in enumerate(PRIORITIES)}
URGENT = "urgent"
NORMAL = "normal"
FRONT = float("-inf")


class PriorityQueue(Generic[T]):
    """Items ordered by (joined − rank × ageing, arrival); `level_of` says an item's level."""

    def __init__(self, level_of: Callable[[T], str], ageing: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.level_of = level_of
        self.ageing = ageing
        self.clock = clock
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self.joined: dict[int, float] = {}  # id(item) → when it joined (for status: how long it waited)

    def append(self, item: T, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.joined[id(item)] = now
        key = now - RANK.get(self.level_of(item), RANK[NORMAL]) * self.ageing
        heapq.heappush(self._heap, (key, next(self._seq), item))

    def appendleft(self, item: T) -> None:
        """First in line, before any level (it had its turn already)."""
        self.joined[id(item)] = self.clock()
        heapq.heappush(self._heap, (FRONT, -next(self._seq), item))

    def popleft(self) -> T:
        item = heapq.heappop(self._heap)[2]
        self.joined.pop(id(item), None)
        return item

    def take_first(self, may: Callable[[T], bool]) -> T | None:
        """The first item in order that `may` start (taken out), else None. Items are taken off the heap in
        order until one may start, and those passed over are put back: no sort of the whole queue per start."""
        heap, passed = self._heap, []
        try:
            while heap:
                entry = heapq.heappop(heap)
                if may(entry[2]):
                    self.joined.pop(id(entry[2]), None)
                    return entry[2]
                passed.append(entry)
            return None
        finally:
            for entry in passed:
                heapq.heappush(heap, entry)

    def peek(self) -> T:
        return self._heap[0][2]

    def remove(self, item: T) -> None:
        for index, entry in enumerate(self._heap):
            if entry[2] is item:
                self._heap[index] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                self.joined.pop(id(item), None)
                return
        raise ValueError("not queued")

    def drop_oldest_lowest(self) -> T:
        """The oldest item of the lowest level present, taken out (a full queue makes room with it)."""
        lowest = min(RANK.get(self.level_of(e[2]), 1) for e in self._heap)
        entry = min((e for e in self._heap if RANK.get(self.level_of(e[2]), 1) == lowest), key=lambda e: e[1])
        self.remove(entry[2])
        return entry[2]

    def waited(self, item: T, now: float | None = None) -> float:
        return max(0.0, (self.clock() if now is None else now) - self.joined.get(id(item), now or 0.0))

    def __iter__(self) -> Iterator[T]:
        return (entry[2] for entry in sorted(self._heap, key=lambda e: (e[0], e[1])))

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
