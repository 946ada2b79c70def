"""Where a listener is in one source: the value both the listener's `_nerve_cursors` and a bound
projection's `_nerve_bindings` keep per source."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cursor:
    """Where a listener is in one source: the last id it consumed, counted in the source database `identity`
    (None: a cursor written before identities, or a source that has none)."""

    last_id: int
    identity: str | None = None
