"""The naming rules for senses, groups, workflows and channels, with no dependencies (workers import it)."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
NAME_MAX = 64


def is_valid_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= NAME_MAX and bool(NAME_RE.match(value))


CHANNEL_MAX = 200  # an external channel's name (an `on:` entry, `nerve emit NAME`)


def channel_problem(value: object) -> str | None:
    """Why `value` cannot be a channel name, or None. Channels are free text, within bounds:
    every emit is logged with its name, so a 900 KB name was 900 KB in the log."""
    if not isinstance(value, str) or not value:
        return "a channel name is a non-empty string"
    if len(value) > CHANNEL_MAX:
        return f"a channel name is at most {CHANNEL_MAX} characters, got {len(value):,}"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "a channel name cannot contain control characters (newline, tab, NUL...)"
    return None
