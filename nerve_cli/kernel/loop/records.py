"""One record per compute, from the start the pump hands over to the outcome that ends it.

The pump opens a record when it starts a compute; the outcomes part fills it in
as the worker answers (what the compute printed, its error, the thread its
directive started) and closes it when the compute ends, handing the whole
record to whoever waited for that compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nerve_cli.wire.protocol import ErrorInfo


@dataclass
class Compute:
    id: int
    sense: str
    group: str | None = None  # its worker's group (None: not handed to a group yet)
    binding: str | None = None  # the parameter values it reads with (names.binding_key), None when unbound
    output: list[dict[str, str]] = field(default_factory=list)  # the lines it printed (bounded by the worker)
    error: ErrorInfo | None = None
    launched: dict[str, Any] = field(default_factory=dict)  # for who waits on it: what it consumed, its thread

    def answer(self, row: dict[str, Any] | None) -> dict[str, Any]:
        """What a reader waiting for this compute is answered: its run_complete row and this record."""
        return {**(row or {}), "output": self.output, "error": self.error.to_dict() if self.error else None,
                **self.launched}


class Computes:
    """The computes under way, by id."""

    def __init__(self) -> None:
        self.open: dict[int, Compute] = {}
        self.in_group: dict[str, int] = {}  # group → its computes under way (a group's `concurrency` counts them)

    def start(self, compute_id: int, sense: str, group: str | None = None) -> Compute:
        record = self.open[compute_id] = Compute(compute_id, sense, group)
        if group is not None:
            self.in_group[group] = self.in_group.get(group, 0) + 1
        return record

    def get(self, compute_id: int) -> Compute | None:
        return self.open.get(compute_id)

    def close(self, compute_id: int, sense: str) -> Compute:
        """The compute's record, removed (a fresh one for a compute the pump never opened)."""
        record = self.open.pop(compute_id, None)
        if record is None:
            return Compute(compute_id, sense)
        if record.group is not None:
            self.in_group[record.group] -= 1
        return record
