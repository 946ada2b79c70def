"""Why a compute runs: a kind, and for the kinds a source woke, that source.

The reason travels as these two fields from the scheduler through the kernel and the wire to the
compute's `trigger`; its one-line text (`on cpu-usage (debounced)`) is made for people and for
the log, and is never read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property, lru_cache


class TriggerKind(StrEnum):
    """What made a compute start."""

    INTERVAL = "interval"    # its interval reflex came round
    CRON = "cron"            # its cron reflex fired
    OVERDUE = "overdue"      # an interval or cron tick missed while no engine ran: once, at start-up
    SIGNAL = "signal"        # a signal or event of `source` it listens to
    DEBOUNCED = "debounced"  # a burst from `source` through a `debounce` reflex, once it went quiet
    DEMAND = "demand"        # asked for: `nerve sense run`, the control socket, MCP
    READ = "read"            # a lazy sense read (sense show, MCP, a peer): brought up to date first
    BACKLOG = "backlog"      # events wait for it (its worker started, or a batch left more)
    RETRY = "retry"          # its compute failed while events wait for it
    FILES = "files"          # files matching `source`, one of its reflexes' `paths:` patterns, changed
    REPLAY = "replay"        # `nerve sense replay` moved a cursor back: its events wait again
    FRESHNESS = "freshness"  # nerve-health, at once: a sense went stale or signals again
    CODE_CHANGED = "code_changed"  # its code or schema was saved: once, as soon as its worker has the new code


_WITH_SOURCE = frozenset({TriggerKind.SIGNAL, TriggerKind.DEBOUNCED, TriggerKind.FILES})


@dataclass(frozen=True)
class Reason:
    """Why one compute runs. `source` is the sense or channel that woke it (signal and debounced), or the
    path pattern whose files changed (files).

    Reasons are shared: `Reason.signal(x)` is one object per source (a hop costs no allocation), and
    its text is made once.
    """

    kind: TriggerKind
    source: str | None = None

    def __post_init__(self) -> None:
        if (self.source is not None) != (self.kind in _WITH_SOURCE):
            raise ValueError(f"a {self.kind} reason {'needs' if self.source is None else 'has no'} source")

    @classmethod
    def signal(cls, source: str) -> Reason:
        return _shared(TriggerKind.SIGNAL, source)

    @classmethod
    def debounced(cls, source: str) -> Reason:
        return _shared(TriggerKind.DEBOUNCED, source)

    @classmethod
    def files(cls, pattern: str) -> Reason:
        return _shared(TriggerKind.FILES, pattern)

    @cached_property
    def text(self) -> str:
        """The reason as logs.db and `nerve logs` have always shown it: `interval`, `on x`, `on x (debounced)`."""
        if self.kind is TriggerKind.SIGNAL:
            return f"on {self.source}"
        if self.kind is TriggerKind.DEBOUNCED:
            return f"on {self.source} (debounced)"
        if self.kind is TriggerKind.FILES:
            return f"files {self.source}"
        return self.kind.value

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind.value, "source": self.source}

    @classmethod
    def from_dict(cls, body: dict) -> Reason:
        """From `to_dict`'s two fields (the wire); ValueError on an unknown kind or a missing source."""
        return cls(TriggerKind(body["kind"]), body.get("source"))

    @classmethod
    def from_wire(cls, body: dict) -> Reason:
        """`from_dict`, shared like `signal`: a worker reads one on every compute (0.1 us against 0.7)."""
        key = (body.get("kind"), body.get("source"))
        reason = _from_wire.get(key)  # type: ignore[arg-type]
        if reason is None:
            reason = cls.from_dict(body)
            if len(_from_wire) < 4096:  # (the kinds times the sources of one instance: a bound, never reached)
                _from_wire[key] = reason  # type: ignore[index]
        return reason


_from_wire: dict[tuple[str, str | None], Reason] = {}


@lru_cache(maxsize=4096)
def _shared(kind: TriggerKind, source: str) -> Reason:
    return Reason(kind, source)


INTERVAL = Reason(TriggerKind.INTERVAL)
CRON = Reason(TriggerKind.CRON)
OVERDUE = Reason(TriggerKind.OVERDUE)
DEMAND = Reason(TriggerKind.DEMAND)
READ = Reason(TriggerKind.READ)
BACKLOG = Reason(TriggerKind.BACKLOG)
RETRY = Reason(TriggerKind.RETRY)
REPLAY = Reason(TriggerKind.REPLAY)
FRESHNESS = Reason(TriggerKind.FRESHNESS)
CODE_CHANGED = Reason(TriggerKind.CODE_CHANGED)
