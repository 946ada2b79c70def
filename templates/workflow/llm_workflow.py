"""Workflow `{{name}}`: a model-backed writer and critic take turns until the critic approves.

Both roles call a language model through `llm` (https://llm.datasette.io):
every provider through its plugins, your own keys and aliases.

Which model:
  1. `model:` under workflows.{{name}} in nerve.yaml (e.g. `model: gpt-4o-mini`), else
  2. llm's default model: `llm models default` shows it, `llm models default claude-3.5-haiku` sets it.
  A role can also pin its own: llm_role(model="...", system="...").
  `llm models` lists what you have; `llm install llm-anthropic` (or llm-ollama for local
  models, ...) adds providers; `llm keys set openai` stores an API key.
An unknown model or a missing key fails the thread at once, saying which command fixes it.

Start a thread:
  nerve workflow run {{name}} --prompt "release notes for 2.0" --max-rounds 6
Then: nerve thread show run-N --transcript   (each message's meta: model, tokens, duration)

Each role sees the conversation so far; the moderator ends the thread when the
critic's answer starts with APPROVED (or at maxRounds). nerve.yaml's
role_timeout / role_retries / role_backoff bound and retry slow or failing calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from nerve_cli.sdk import END, WorkflowDefinition, WorkflowMessage, llm_role

writer = llm_role(system=(
    "You are a careful writer. Write what the prompt asks for. When a critic has answered, "
    "rewrite your last draft to address every point. Answer with the text only."))

critic = llm_role(system=(
    "You are a demanding editor. Judge the writer's latest draft against the prompt. If it is "
    "ready, answer APPROVED on the first line. Otherwise list at most three concrete fixes."))


def moderator(messages: Sequence[WorkflowMessage]) -> str:
    """writer → critic → writer … until the critic approves."""
    last = messages[-1]
    if last.role == "critic" and last.content.strip().upper().startswith("APPROVED"):
        return END
    return "critic" if last.role == "writer" else "writer"


workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic}, moderator=moderator)
