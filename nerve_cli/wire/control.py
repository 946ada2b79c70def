"""What the control socket's two ends (the engine's server and the CLI's client) must agree on."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from nerve_cli.wire.limits import MAX_PAYLOAD  # not protocol: its message classes cost the CLI ~10 ms

# The engine waits for a compute asked on its socket as long as the sense's timeout and grace period
# allow (kernel/control/requests.py), at most COMPUTE_WAIT_MAX; a client waits a little longer, so the
# engine's answer (the outcome, or "did not finish within ...") always arrives before the client gives up.
COMPUTE_WAIT_MAX = 600.0

# One request line: an emit at the payload limit, with room for its envelope (op, channel, key).
MAX_REQUEST = MAX_PAYLOAD + 64 * 1024

_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def loads(data: bytes) -> Any:
    """A line of the socket, decoded: by orjson (several times faster than json), except a line holding a run
    of 19 digits, which orjson would read as a float if it is an integer past 64 bits, silently changing it;
    json keeps it whole. Raises ValueError (both libraries' decode errors are ValueErrors) or RecursionError.
    Both refuse what JSON has no number for (NaN, Infinity, 1e400): stored, it would become null."""
    if _LONG_DIGITS.search(data):
        return json.loads(data, parse_constant=_not_json, parse_float=_finite)
    return orjson.loads(data)


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON (JSON has no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is past the largest JSON number a double holds (about 1.8e308)")
    return value


def dumps(body: Any) -> bytes:
    """One line of the socket: compact UTF-8 JSON, as the engine counts and stores a payload (no \\u escapes
    doubling non-ASCII text), ending in a newline. An integer past 64 bits (orjson refuses it) goes whole,
    through json, for the other side to judge."""
    try:
        return orjson.dumps(body, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json.dumps(body, default=str, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
