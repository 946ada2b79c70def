"""The chain a rerun starts from: a thread's chain cut after a round, its last message optionally edited."""

from __future__ import annotations

from typing import Any

from nerve_cli.automaton.model import WorkflowMessage, is_round, rounds_used
from nerve_cli.automaton.waits import WAITS_FOR_EVENT


def fork(chain: list[WorkflowMessage], run_id: str, from_round: int | None, message: str | None,
         now: int) -> list[WorkflowMessage]:
    """The chain a rerun starts from: [] (a fresh start), or the old chain cut after round `from_round`
    (0: the start message alone), its last message's content replaced by `message` when given.

    ValueError when the round is out of range. A kept wait for an event waits for events from now on.
    """
    if from_round is None:
        if message is not None:
            raise ValueError("--message edits the last message kept by --from-round; give --from-round too")
        return []
    rounds = rounds_used(chain)
    if not 0 <= from_round <= rounds:
        raise ValueError(f"{run_id} has {rounds} round(s): --from-round takes 0 to {rounds}")
    kept, counted = [chain[0]], 0
    for m in chain[1:]:
        if counted == from_round:
            break  # what came after round K (an answer to it, a note) is not kept
        kept.append(m)
        counted += is_round(m.role)
    last = kept[-1]
    meta: dict[str, Any] = dict(last.meta)
    wait = meta.get(WAITS_FOR_EVENT)
    if isinstance(wait, dict):
        meta[WAITS_FOR_EVENT] = {**wait, "since_ms": now}
    kept[-1] = WorkflowMessage(last.role, last.content if message is None else message, meta, last.timestamp)
    return kept
