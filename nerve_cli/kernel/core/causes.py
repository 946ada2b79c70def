"""Causal depth: how many hops each signal, event, compute and thread is from the outside world.

The world is depth 0: a timer, a person (`nerve sense compute`, `nerve workflow
run`, MCP, the console), a webhook, a file, an outside `nerve emit`. What a
compute at depth N causes (its signal, its emits, the thread its directive
starts) is at N + 1; a thread at depth N reports its transitions (nerve-threads'
signals) and emits at N + 1. A compute is as deep as the deepest event it
consumed: each item routed to a listener is held by (source, id) until the
listener's answer says which ids it consumed (`woke` → `answered`), so a compute
that reads a backlog another compute was woken for is as deep as what it read;
and a compute is at least as deep as what woke it (`started`), even when an
earlier compute already consumed it.

Past its bound (`engine.max_causal_depth`, or the `max_depth` of the reflex that
runs the sense) a directive or an emit is refused (`admit`): logged once per
chain, naming the chain's path, counted every time. A chain is named by its
root, the outside trigger it began with (`Cause.path[0]`), so the thousand
branches of one runaway loop make one log row.

Costs an append per woken listener and a tuple per hop: the path is the hops'
names, at most `MAX_PATH` of them (the root and the latest ones kept); at most
`HELD` items are held per listener and source (older ones fold into one floor,
as deep as the deepest of them).
Kept in memory for signals and events (an engine restart starts chains again
from 0: a restart is a person's act); a thread keeps its cause in its origin.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow

MAX_PATH = 24  # hops named in a path (the root, "…", the latest ones)
_CHAINS = 4096  # refused chains remembered (so each is logged once); the oldest are forgotten first
HELD = 4096  # items held per listener and source until consumed


@dataclass(frozen=True, slots=True)
class Cause:
    depth: int
    path: tuple[str, ...]  # path[0]: the root, the outside trigger the chain began with

    def hop(self, node: str) -> Cause:
        """What this causes at `node`: one deeper."""
        path = self.path
        if len(path) >= MAX_PATH:
            path = (path[0], "…", *path[-(MAX_PATH - 3):])
        return Cause(self.depth + 1, (*path, node))

    def via(self, node: str) -> Cause:
        """The same depth, through `node` (a directive's thread is as deep as its compute's signal)."""
        return Cause(self.depth, (*self.path, node))

    @property
    def chain(self) -> str:
        return self.path[0] if self.path else "?"

    def shown(self) -> str:
        return " → ".join(self.path)

    def to_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "path": list(self.path)}

    @classmethod
    def from_json(cls, value: Any) -> Cause | None:
        """A cause as `to_json` wrote it (in a thread's origin); None when it is not one (an older row)."""
        if not isinstance(value, dict) or not isinstance(value.get("depth"), int):
            return None
        path = value.get("path")
        return cls(value["depth"], tuple(str(p) for p in path) if isinstance(path, list) else ())


def world(root: str) -> Cause:
    """An outside trigger: depth 0, the root of a new chain."""
    return Cause(0, (root,))


def deeper(a: Cause | None, b: Cause | None) -> Cause | None:
    return b if a is None or (b is not None and b.depth > a.depth) else a


class _Held:
    """The items of one source routed to one listener and not consumed yet: (id, cause), in id order."""

    __slots__ = ("items", "floor")

    def __init__(self) -> None:
        self.items: deque[tuple[int, Cause]] = deque()
        self.floor: tuple[int, Cause] | None = None  # (last id, deepest cause) of the items folded away

    def add(self, item_id: int, cause: Cause) -> None:
        self.items.append((item_id, cause))
        if len(self.items) > HELD:
            old_id, old = self.items.popleft()
            floor = self.floor
            self.floor = (old_id, old if floor is None or old.depth > floor[1].depth else floor[1])

    def take(self, last: int) -> Cause | None:
        """The deepest cause among the items up to id `last` (consumed): they are let go."""
        best = None
        if self.floor is not None and self.floor[0] <= last:
            best, self.floor = self.floor[1], None
        items = self.items
        while items and items[0][0] <= last:
            best = deeper(best, items.popleft()[1])
        return best


class Causes:
    """Each listener's pending cause, each running compute's, each source's latest; the refusals."""

    def __init__(self, bound: Callable[[str | None], int], log: Callable[[LogRow], Any],
                 report: Callable[[str, str], None], bound_into: Callable[[str], int] | None = None) -> None:
        self.bound = bound  # sense (None: no sense's) → the deepest it may cause
        self.bound_into = bound_into or (lambda _source: bound(None))  # source → the deepest that may come in on it
        self.log = log
        self.report = report
        self.pending: dict[str, Cause] = {}  # listener → the deepest item that woke it since its last start
        self.held: dict[str, dict[str, _Held]] = {}  # listener → source → its items not consumed yet
        self.running: dict[int, tuple[Cause | None, str]] = {}  # compute id → (its cause, so far; why it runs)
        self.latest: dict[str, Cause] = {}  # source → the cause of its latest signal or event
        self.refused: Counter[str] = Counter()  # what (directive, emit, publish) → refusals
        self.last: dict[str, Any] | None = None  # the latest refusal (status, top)
        self._chains: OrderedDict[str, int] = OrderedDict()  # refused chain → refusals

    # the loop's hops -------------------------------------------------------------
    def woke(self, targets: Iterable[str], cause: Cause, source: str | None = None,
             item_id: int | None = None) -> None:
        """`cause` (that of item `item_id` of `source`) made `targets` pending: each one's next compute is at
        least as deep (it was woken by it, whatever it reads), and the one that consumes the item as deep."""
        pending = self.pending
        for target in targets:
            held = pending.get(target)
            if held is None or held.depth < cause.depth:
                pending[target] = cause
        if item_id is None or source is None:
            return
        for target in targets:
            by_source = self.held.get(target)
            if by_source is None:
                by_source = self.held[target] = {}
            items = by_source.get(source)
            if items is None:
                items = by_source[source] = _Held()
            items.add(item_id, cause)

    def started(self, compute_id: int, sense: str, why: str) -> None:
        """A compute of `sense` starts (`why`: its reason, naming the root of a chain it begins)."""
        self.running[compute_id] = (self.pending.pop(sense, None), why)

    def answered(self, compute_id: int, sense: str, consumed: Iterable[dict[str, Any]]) -> None:
        """The compute answered, having consumed these events ({source, last}, per source): it is as deep as
        the deepest of them."""
        found = self.running.get(compute_id)
        by_source = self.held.get(sense)
        if found is None or by_source is None:
            return
        cause = found[0]
        for entry in consumed:
            items = by_source.get(str(entry.get("source")))
            last = entry.get("last")
            if items is not None and isinstance(last, int):
                cause = deeper(cause, items.take(last))
        self.running[compute_id] = (cause, found[1])

    def ended(self, compute_id: int) -> None:
        self.running.pop(compute_id, None)

    def compute(self, sense: str, compute_id: int | None) -> Cause:
        """A compute's cause: as deep as what it consumed, or (nothing: a timer, a person) a new chain's root."""
        found = None if compute_id is None else self.running.get(compute_id)
        if found is None:
            return world(sense)
        return found[0] if found[0] is not None else world(f"{sense} #{compute_id} ({found[1]})")

    def signalled(self, sense: str, compute_id: int | None) -> Cause:
        """The cause of a signal of `sense` from compute `compute_id` (one deeper than the compute)."""
        cause = self.compute(sense, compute_id).hop(sense)
        self.latest[sense] = cause
        return cause

    def source(self, name: str, cause: Cause) -> Cause:
        """`cause` is that of the latest item of source `name` (the fleet sends it along)."""
        self.latest[name] = cause
        return cause

    # the guard ------------------------------------------------------------------
    def admit(self, what: str, target: str, cause: Cause, sense: str | None = None) -> bool:
        """May `cause` (already one deeper: the thread's, the emit's) reach `target`? Past the bound of `sense`
        (the sense whose compute asks; None: the engine's bound) it is refused: counted, and logged the first
        time its chain is refused."""
        bound = self.bound(sense)
        return cause.depth <= bound or self._refuse(what, target, cause, sense, bound)

    def admit_into(self, what: str, source: str, cause: Cause) -> bool:
        """May `cause`, arriving from outside this engine (another host) on `source`, come in? Past the bound of
        what hears `source` (the largest `max_depth` of its listeners' reflexes) it is refused, as in `admit`."""
        bound = self.bound_into(source)
        return cause.depth <= bound or self._refuse(what, source, cause, None, bound)

    def _refuse(self, what: str, target: str, cause: Cause, sense: str | None, bound: int) -> bool:
        """Count the refusal, log it the first time its chain is refused; False (refused)."""
        self.refused[what] += 1
        chain = cause.chain
        seen = self._chains.get(chain)
        self._chains[chain] = (seen or 0) + 1
        self._chains.move_to_end(chain)
        while len(self._chains) > _CHAINS:
            self._chains.popitem(last=False)
        self.last = {"what": what, "target": target, "sense": sense, "depth": cause.depth, "bound": bound,
                     "path": list(cause.path), "chain": chain}
        if seen is None:
            self.log(logrows.causal_refused(what, target, cause.depth, bound, list(cause.path), sense))
            by = f" by {sense}" if sense else ""
            self.report("error", f"causal depth {cause.depth} is past the bound of {bound}: {what} to {target}{by} "
                                 f"refused (path: {cause.shown()}); the rest of this chain is refused without "
                                 "another line (declare the loop's bound with `max_depth:` on its reflex)")
        return False

    def status(self) -> dict[str, Any]:
        """{"refused": total, "by_what": {...}, "chains": refused chains, "last": the latest refusal}."""
        return {"refused": sum(self.refused.values()), "by_what": dict(self.refused), "chains": len(self._chains),
                "last": self.last}
