"""Sample for tests/test_workflow_typecheck.py: every line marked `# E` must be a mypy error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from nerve_cli.sdk import END, RoleResult, WorkflowDefinition, WorkflowMessage


class ReviewMeta(TypedDict):
    approved: bool


class ScoreMeta(TypedDict):
    score: float


async def reviewer(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]:
    return RoleResult("ok", {"approved": True})


async def scorer(messages: Sequence[WorkflowMessage]) -> RoleResult[ScoreMeta]:
    return RoleResult("ok", {"score": 0.5})


async def misspelt(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]:
    return RoleResult("ok", {"aproved": True})  # E


async def wrong_content(messages: Sequence[WorkflowMessage]) -> RoleResult[ReviewMeta]:
    return RoleResult(42, {"approved": True})  # E


def route(messages: Sequence[WorkflowMessage]) -> str:
    return END


def int_route(messages: Sequence[WorkflowMessage]) -> int:
    return 1


explicit = WorkflowDefinition[ReviewMeta](roles={"r": reviewer, "s": scorer}, moderator=route)  # E
annotated: WorkflowDefinition[ReviewMeta] = WorkflowDefinition(roles={"s": scorer}, moderator=route)  # E
bad_moderator = WorkflowDefinition[ReviewMeta](roles={"r": reviewer}, moderator=int_route)  # E
