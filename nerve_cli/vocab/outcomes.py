"""How a compute ended."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """The outcome of one compute, as `run_complete` rows and `nerve sense run --json` hold it."""

    SIGNAL = "signal"    # it returned a value: committed with its `_signals` row, routed to listeners
    SILENT = "silent"    # it returned None (rolled back) or KEEP (committed, no signal)
    ERROR = "error"      # it raised, returned something unstorable, or could not be sent to a worker
    TIMEOUT = "timeout"  # it ran past its timeout: abandoned and rolled back, its result discarded
    LOST = "lost"        # its worker died while it ran

    @property
    def succeeded(self) -> bool:
        """A signal or silent compute: the sense works (ends a failure streak)."""
        return self in (Outcome.SIGNAL, Outcome.SILENT)
