"""A pipeline as an automaton: the moderator, and each step's state read back from a thread's chain.

Each step is a role named after its id, a gate is a role `gate:<id>` that
asks a person, and the moderator is a pure function of the chain: the next
step whose needs are all done (in file order), behind its gate when it has
one; END when none is left, or when a person refused. So a pipeline thread is
a thread like any other (rounds, waits, crash recovery), and a step's state is
what its chain says (`step_states`), never stored apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nerve_cli.automaton.model import END, PERSON, START, asks_person
from nerve_cli.config.pipeline import GATE_PREFIX, Pipeline
from nerve_cli.vocab.states import StepStatus


def gate_role(step_id: str) -> str:
    return GATE_PREFIX + step_id


def _role(m: Any) -> str:
    return m.role if hasattr(m, "role") else m.get("role")


def _meta(m: Any) -> Mapping[str, Any]:
    meta = m.meta if hasattr(m, "meta") else m.get("meta")
    return meta if isinstance(meta, Mapping) else {}


@dataclass(frozen=True)
class StepState:
    id: str
    state: StepStatus
    round: int | None = None  # the round that did it
    why: str = ""  # waiting: for whom; pending: which needs are not done; refused: the note


def step_states(pipeline: Pipeline, messages: Sequence[Any]) -> list[StepState]:
    """Each step's state, read from a thread's chain (its messages, oldest first)."""
    done: dict[str, int] = {}
    approved: set[str] = set()
    refused: dict[str, str] = {}
    waiting: dict[str, str] = {}
    rounds = 0
    ids = {s.id for s in pipeline.steps}
    for i, message in enumerate(messages):
        role = _role(message)
        if role not in (START, PERSON):
            rounds += 1
        answer = messages[i + 1] if i + 1 < len(messages) and _role(messages[i + 1]) == PERSON else None
        target = role[len(GATE_PREFIX):] if role.startswith(GATE_PREFIX) else role
        if target not in ids:
            continue
        asked = asks_person(message)
        if asked and answer is None:
            waiting[target] = "a person's approval" if role.startswith(GATE_PREFIX) else "a person to do it"
        elif asked and not _meta(answer).get("approved"):
            refused[target] = str(_meta(answer).get("note") or "rejected")
        elif role.startswith(GATE_PREFIX):
            approved.add(target)
        else:
            done[target] = rounds
    out = []
    for step in pipeline.steps:
        if step.id in done:
            out.append(StepState(step.id, StepStatus.DONE, done[step.id]))
        elif step.id in refused:
            out.append(StepState(step.id, StepStatus.REFUSED, why=refused[step.id]))
        elif step.id in waiting:
            out.append(StepState(step.id, StepStatus.WAITING, why=waiting[step.id]))
        else:
            missing = [n for n in step.needs if n not in done]
            out.append(StepState(step.id, StepStatus.PENDING if missing else StepStatus.READY,
                                 why=("needs " + ", ".join(missing)) if missing else ""))
    return out


def next_role(pipeline: Pipeline, messages: Sequence[Any]) -> str:
    """The moderator: the next step (behind its gate), or END when every step is done or a person refused."""
    states = {s.id: s for s in step_states(pipeline, messages)}
    if any(s.state is StepStatus.REFUSED for s in states.values()):
        return END
    gates_passed = {_role(m)[len(GATE_PREFIX):] for i, m in enumerate(messages)
                    if _role(m).startswith(GATE_PREFIX) and i + 1 < len(messages)
                    and _role(messages[i + 1]) == PERSON and _meta(messages[i + 1]).get("approved")}
    for step in pipeline.steps:
        if states[step.id].state is not StepStatus.READY:
            continue
        if pipeline.gated(step) and step.id not in gates_passed:
            return gate_role(step.id)
        return step.id
    return END
