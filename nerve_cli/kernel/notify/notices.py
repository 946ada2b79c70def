"""What a person is told: a notice per signal of nerve-threads (a transition) or nerve-health (a sense gone
stale, newly quarantined), and which rules want it. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nerve_cli.config.model import NotifyRule

THREAD_EVENTS = frozenset({"waiting", "failed", "crashed", "completed", "cancelled", "dropped"})


@dataclass(frozen=True)
class Notice:
    kind: str  # a NOTIFY_EVENTS value
    title: str
    body: str
    workflow: str | None = None
    sense: str | None = None
    run_id: str | None = None  # a waiting thread's: its notice carries an answer link
    person: bool = False  # it waits for a person (not for an event)
    questions: tuple[str, ...] = ()  # the ids of the questions it asks (several: a link for each)


def thread_notice(payload: Mapping[str, Any]) -> Notice | None:
    """A nerve-threads signal as a notice, or None for a transition nobody is told of (queued, started...)."""
    kind, run_id, workflow = payload.get("transition"), payload.get("run_id"), payload.get("workflow")
    if kind not in THREAD_EVENTS or not isinstance(run_id, str):
        return None
    if kind == "waiting":
        wait = _map(payload.get("waiting_for"))
        person = wait.get("kind", "person") == "person"
        what = str(payload.get("question") or "") if person else str(wait.get("description") or payload.get("reason"))
        title = f"{run_id} ({workflow}) waits for {'a person' if person else 'an event'}"
        asked = tuple(str(q.get("id")) for q in wait.get("questions") or [] if isinstance(q, Mapping) and q.get("id"))
        return Notice(kind, title, what.strip(), workflow, None, run_id, person, asked)
    reason = payload.get("reason")
    return Notice(kind, f"{run_id} ({workflow}) {kind}", str(reason or kind), workflow, None, run_id)


def health_notices(payload: Mapping[str, Any], quarantined_before: set[str]) -> tuple[list[Notice], set[str]]:
    """The senses a nerve-health signal says went stale or are newly quarantined, and the quarantined now."""
    out = []
    stale = _map(payload.get("stale"))
    for name in payload.get("went_stale") or []:
        every = _map(stale.get(name)).get("expected_every_s")
        within = f" within {every:g}s" if isinstance(every, (int, float)) else ""
        out.append(Notice("stale", f"sense {name} is stale", f"{name} sent no signal{within} "
                                                             "(expect_signal_every)", sense=str(name)))
    blocked = _map(payload.get("blocked"))
    now = {str(n) for n, b in blocked.items() if isinstance(b, Mapping) and b.get("quarantined")}
    for name in sorted(now - quarantined_before):
        why = _map(blocked.get(name)).get("why")
        out.append(Notice("quarantined", f"sense {name} is quarantined", str(why or "quarantined"), sense=name))
    return out, now


def wants(rule: NotifyRule, notice: Notice) -> bool:
    """Whether the rule tells of this notice (its `on:`, then its filters)."""
    if notice.kind not in rule.on:
        return False
    if notice.workflow is not None and rule.workflows and notice.workflow not in rule.workflows:
        return False
    if notice.sense is not None and rule.senses and notice.sense not in rule.senses:
        return False
    return True


def targets(rule: NotifyRule, environ: Mapping[str, str]) -> list[str]:
    """The rule's apprise URLs: `to:`, then those in `to_env` (space or comma apart)."""
    extra: Iterable[str] = ()
    if rule.to_env is not None:
        extra = [u for u in environ.get(rule.to_env, "").replace(",", " ").split() if u]
    return [*rule.to, *extra]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
