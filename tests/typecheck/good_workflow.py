"""Sample for tests/test_workflow_typecheck.py: must type-check cleanly under mypy --strict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from nerve_cli.sdk import END, START, RoleResult, WorkflowDefinition, WorkflowMessage


class ReviewMeta(TypedDict, total=False):
    approved: bool
    words: int


async def author(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]:
    return RoleResult(f"draft about {messages[0].content}", {"words": 3})


async def reviewer(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]:
    return RoleResult("approved", {"approved": True})


def route(messages: Sequence[WorkflowMessage]) -> str:
    last = messages[-1]
    if last.role == START:
        return "author"
    if last.meta.get("approved"):
        return END
    return "reviewer"


workflow = WorkflowDefinition[ReviewMeta](roles={"author": author, "reviewer": reviewer}, moderator=route)
