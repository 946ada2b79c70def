"""Where a listener is in one source: the value both the listener's `_nerve_cursors` and a bound
projection's `_nerve_bindings` keep per source."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cursor:
    """Where a listener is in one source: the last id it consumed, counted in the source database `identity`
    (None: a cursor written before identities, or a source that has none), and when it was written (unix ms;
    None: not read back). Two cursors at the same place are equal whenever they were written."""

    last_id: int
    identity: str | None = None
    ts: int | None = field(default=None, compare=False)
