"""Whether a thread may be requested: its workflow is in nerve.yaml and enabled, its prompt is not empty, and
the rounds it gets (`engine.max_rounds` caps any request), and its `concurrency_key`. The engine and a stopped
instance's rerun ask."""

from __future__ import annotations

import json
from typing import Any

from nerve_cli.config.model import NerveConfig, WorkflowConfig
from nerve_cli.config.rules import nearest
from nerve_cli.errors import WorkflowError


def check_request(config: NerveConfig, workflow: str, prompt: Any, max_rounds: Any) -> tuple[WorkflowConfig, int]:
    """The workflow's settings and the rounds it gets; WorkflowError for a request that cannot run."""
    cfg = launchable(config, workflow)
    rounds = capped_rounds(config, max_rounds)
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkflowError(f"workflow {workflow}: the prompt is empty")
    return cfg, rounds


def launchable(config: NerveConfig, workflow: str) -> WorkflowConfig:
    cfg = config.workflows.get(workflow)
    if cfg is None:
        known = ", ".join(sorted(config.workflows)) or "none"
        close = nearest(workflow, list(config.workflows))
        fix = f"did you mean `{close}`?" if close else f"create it with `nerve workflow new {workflow}`"
        raise WorkflowError(f"unknown workflow {workflow!r} (nerve.yaml workflows: {known}); {fix}")
    if not cfg.enabled:
        raise WorkflowError(f"workflow {workflow} is disabled (nerve.yaml: workflows.{workflow}.enabled "
                            f"is false); enable it with `nerve workflow enable {workflow}`")
    return cfg


MAX_REQUEST = 2**63 - 1  # a larger request could not be logged (64-bit JSON integers)


def capped_rounds(config: NerveConfig, requested: Any) -> int:
    cap = config.engine.max_rounds
    if requested is None:
        return cap
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_REQUEST:
        raise WorkflowError(f"max_rounds must be a whole number from 1 to {MAX_REQUEST}, got {requested!r:.40} "
                            f"(the engine caps it at engine.max_rounds, {cap}, anyway)")
    return min(requested, cap)  # the engine has the last word: engine.max_rounds caps any request


def thread_key(cfg: WorkflowConfig, prompt: str, origin: dict[str, Any]) -> str | None:
    """The thread's value of its workflow's `concurrency_key`, as canonical text (`7`, `"a"`); None: no key
    (none configured, a prompt that is not a JSON object, or no such field)."""
    path = cfg.concurrency_key
    if path is None:
        return None
    head, _, rest = path.partition(".")
    if head == "prompt" and not rest:
        return json.dumps(prompt)
    if head == "prompt":
        try:
            value: Any = json.loads(prompt)
        except ValueError:
            return None
    else:
        value = origin
    for part in rest.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
