"""Where a listener's events come from."""

from __future__ import annotations

from enum import StrEnum


class SourceKind(StrEnum):
    """A source's kind: whose store holds its events (`on:` sources, cursors, fleet subjects, waits)."""

    SENSE = "sense"  # a sense's signals, in its database's _signals (the built-in senses' too)
    CHANNEL = "channel"  # an external channel's events, in data/events.db
    FILE = "file"  # a file reflex's changes (a path glob)
    PATTERN = "pattern"  # the channels a subject pattern (`pr.*`, `ci.>`) matches, in data/events.db


class CursorJump(StrEnum):
    """Why a listener's read of a source does not go on from its cursor (log row `cursor_restarted`'s `why`)."""

    REBUILT = "rebuilt"  # the source's database was made again (another identity): read from its first event
    RESTORED = "restored"  # the same database put back from an earlier copy (ids behind the cursor)
