"""`nerve thread link run-N`: an answer link to a waiting thread, served by the engine's HTTP listener.

The URL is the listener's (the running engine's `webhooks_url`, else
`engine.webhooks` in nerve.yaml) with `/answer/TOKEN`; the token
(`store.links`) names the thread, the question (or every open one), who the
answer will be recorded as, and when it expires. A link to a thread that is
not waiting for a person, or to a question it does not have open, is refused.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from nerve_cli.automaton.questions import open_questions
from nerve_cli.config.load import load_config
from nerve_cli.errors import NerveError, WorkflowError
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.workflows.threads import normalise_run_id
from nerve_cli.store import links
from nerve_cli.store.logs import workflow_runs
from nerve_cli.store.runs import persisted_chain
from nerve_cli.vocab.states import ThreadStatus

PATH = "/answer/"
MAX_EXPIRES = 366 * 86400.0


def listener_base(home: Path) -> str:
    """`http://HOST:PORT` of the engine's HTTP listener; NerveError when the instance has none."""
    if engine_running(home):
        url = request(home, "status").get("webhooks_url")
        if url:
            return str(url).rsplit("/emit/", 1)[0]
    address = load_config(Path(home)).engine.webhooks
    if address is None:
        raise NerveError("answer links are served by the engine's HTTP listener, and this instance has none: set "
                         "`engine: {webhooks: 127.0.0.1:8788}` in nerve.yaml (or start `nerve run --webhooks "
                         "127.0.0.1:8788`); an address other than loopback wants TLS in front of it")
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"http://{host}:{address.port}"


def make_link(home: Path, run_id: str, question: str | None, expires_s: float, by: str | None = None,
              now: float | None = None) -> dict[str, Any]:
    """{"url", "run_id", "question", "questions", "by", "expires_at"}; WorkflowError when the thread does not
    wait for a person (or not on that question)."""
    run_id = normalise_run_id(run_id)
    if not math.isfinite(expires_s) or not 0 < expires_s <= MAX_EXPIRES:
        raise NerveError("--expires must be above 0 and at most 366d, e.g. --expires 1d")
    layout = Layout(Path(home))
    rows = [r for r in workflow_runs(layout.logs_db) if r["run_id"] == run_id]
    if not rows or rows[0]["status"] != ThreadStatus.WAITING:
        what = f"is {rows[0]['status']}" if rows else "does not exist"
        raise WorkflowError(f"{run_id} {what}: a link answers a thread waiting for a person "
                            "(see `nerve thread list --status waiting`)")
    open_ = open_questions(persisted_chain(layout.logs_db, run_id)) or []
    if not open_:
        raise WorkflowError(f"{run_id} waits for an event, not for a person: nobody answers it with a link")
    ids = [q.id for q in open_]
    if question is not None and question not in ids:
        raise WorkflowError(f"{run_id} has no open question {question!r} (open: {', '.join(ids)})")
    base = listener_base(home)
    who = by or person(home)
    expires = int((time.time() if now is None else now) + expires_s)
    token = links.mint(layout.home, run_id, question, who, expires)
    return {"url": f"{base}{PATH}{token}", "run_id": run_id, "question": question,
            "questions": [question] if question else ids, "by": who, "expires_at": expires}
