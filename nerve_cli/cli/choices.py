"""The closed sets options choose from: Click checks them, so a typo exits 2 listing the valid values.

Kept here (stdlib only) so building `--help` and shell completion import nothing
else; tests check that they match the sets the library uses.
"""

from __future__ import annotations

from enum import Enum


class Format(str, Enum):
    """How a command prints: a table on a terminal, tab-separated lines in a pipe, unless told."""

    table = "table"
    tsv = "tsv"
    csv = "csv"
    json = "json"


class MeshFormat(str, Enum):
    tree = "tree"
    mermaid = "mermaid"
    dot = "dot"
    json = "json"


class ThreadStatus(str, Enum):
    """workflow_runs.status (store.logs.STATUSES)."""

    queued = "queued"
    started = "started"
    waiting = "waiting"
    completed = "completed"
    failed = "failed"
    crashed = "crashed"
    dropped = "dropped"
    cancelled = "cancelled"
    paused = "paused"


class LogSource(str, Enum):
    """logs.source: what wrote the row."""

    reflex = "reflex"
    workflow = "workflow"
    system = "system"
    signal = "signal"


class Platform(str, Enum):
    """What `nerve service` writes: a systemd user unit or a launchd agent (instance.service.unit_for)."""

    linux = "linux"
    macos = "macos"


def value(choice: Enum | None) -> str | None:
    return None if choice is None else str(choice.value)
