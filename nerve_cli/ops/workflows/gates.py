"""`nerve thread approve|reject run-N [--question ID] [--note TEXT]`: a person answers a thread that waits.

Every answer goes through the one answer path (`store.answers`): through the
running engine (control socket `answer_thread`), the thread resumes at once or
queues behind its workflow's running threads once every question of its round
is settled; with no engine running the same rows are written to logs.db under
the instance lock and the thread resumes at the next `nerve run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.instance.git import person
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.workflows.threads import normalise_run_id
from nerve_cli.store.answers import Answer, answer_stopped


def answer_thread(home: Path, run_id: str, decision: str, note: str | None, via: str,
                  data: Any = NO_ANSWER, question: str | None = None, by: str | None = None) -> dict[str, Any]:
    """{"run_id", "decision", "status": started|queued|waiting, "answered", "settled", "open", "resumes",
    "via": engine|offline}; NerveError when it is not waiting or the answer cannot be taken.

    The answer records who gave it (`by`; default git's user.name, else the login name) and `via`, the way
    it came (`nerve thread approve`, `nerve top`, `nerve mcp`, `link`, `nerve ui`); `data` is a structured
    answer (any JSON value); `question` one question's id (None: every open question).
    """
    run_id = normalise_run_id(run_id)
    who = by if by is not None else person(home)
    if engine_running(home):
        extra: dict[str, Any] = {} if data is NO_ANSWER else {"answer": data}
        if question is not None:
            extra["question"] = question
        answer = request(home, "answer_thread", run_id=run_id, decision=decision, note=note, by=who, via=via, **extra)
        return {**answer, "via": "engine"}
    done = answer_stopped(home, Answer(run_id, decision, who, via, note, data, question))
    return {**done.to_json(), "status": "queued" if done.resumes else "waiting", "via": "offline"}
