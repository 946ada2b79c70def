"""Workflow `{{name}}`: an author drafts, a reviewer asks for more until the draft is long enough.

How it runs: a thread's first message is the prompt (role "__start__"). The
moderator reads the chain and names the next role (or END); that role runs and
its RoleResult becomes the next message; repeat until END or the thread's
maxRounds. Every message is saved before the next step.

Start a thread:
  nerve workflow run {{name}} --prompt "the release notes" --max-rounds 6
or from a sense:
  return SenseResult(payload, workflow="{{name}}|6|the release notes")
Then: nerve thread show run-N

Roles are async functions and may have side effects (call a model, run a tool).
The moderator must stay pure: it only looks at the messages.
Set `idempotent: true` in nerve.yaml only if re-running a role after a crash is safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from nerve_cli.sdk import END, RoleResult, WorkflowDefinition, WorkflowMessage

MIN_WORDS = 12  # the reviewer approves a draft with at least this many words


class Meta(TypedDict, total=False):
    """What the roles put in a message's `meta` (checked by mypy/pyright)."""

    draft: int
    words: int
    approved: bool


async def author(messages: Sequence[WorkflowMessage]) -> RoleResult[Meta]:
    """Write the next draft: each one adds a sentence to the last."""
    drafts = [m for m in messages if m.role == "author"]
    previous = drafts[-1].content if drafts else f"A note about {messages[0].content}."
    text = previous if not drafts else f"{previous} It also covers point {len(drafts) + 1} in more detail."
    return RoleResult(text, {"draft": len(drafts) + 1})


async def reviewer(messages: Sequence[WorkflowMessage]) -> RoleResult[Meta]:
    """Approve the latest draft once it is long enough; otherwise ask for more."""
    words = len(messages[-1].content.split())
    approved = words >= MIN_WORDS
    verdict = "approved" if approved else f"too short ({words} words, want {MIN_WORDS}): add more detail"
    return RoleResult(verdict, {"words": words, "approved": approved})


def moderator(messages: Sequence[WorkflowMessage]) -> str:
    """author → reviewer → author … until the reviewer approves."""
    last = messages[-1]
    if last.role == "reviewer" and last.meta.get("approved"):
        return END
    return "reviewer" if last.role == "author" else "author"


workflow = WorkflowDefinition[Meta](roles={"author": author, "reviewer": reviewer}, moderator=moderator)
