"""The size limits both ends of every pipe and socket agree on (no other import: the CLI's client reads them)."""

from __future__ import annotations

MAX_LINE = 16 * 1024 * 1024  # asyncio stream limit; payloads above this are refused
LOG_PREFIX = "worker group="  # a sense worker's own stderr lines start with this; user output does not
# The one limit on a payload, in bytes of JSON: a signal (checked in the worker before COMMIT; its Signal
# line, with the id, the sense name, a directive and the timings around it, must stay under MAX_LINE) and an
# external event (checked before it is stored: it becomes a listener's event just like a signal).
MAX_PAYLOAD = MAX_LINE - 64 * 1024


def payload_too_large(size: int, what: str) -> str:
    """The one wording of a refused payload: `what` is e.g. "compute returned" or "the event payload is"."""
    return (f"{what} {size / 2**20:.1f} MiB of JSON ({size:,} bytes); a signal or event carries at most "
            f"{MAX_PAYLOAD:,} bytes ({MAX_PAYLOAD / 2**20:.1f} MiB), so nothing was stored. Keep large data in the "
            "sense's tables or in db.blobs.put(data), and send something small (e.g. its hash)")
