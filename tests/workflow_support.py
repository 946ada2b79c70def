"""Helpers for the workflow tests: tmp instances with real workflow files, a manager, polling."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from loadclock import IdleClock

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.store.logs import LogStore, query_logs, workflow_runs

# Roles used across tests. `blocking` waits for a gate file at the round named
# in the prompt ("gate=3"), leaving a `waiting-<round>` marker, so a test can
# kill a worker while a role is mid-flight.
COMMON = textwrap.dedent('''
    import asyncio, os, time
    from pathlib import Path
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    HERE = Path(__file__).resolve().parent.parent

    def opt(messages, key, default=None):
        for part in messages[0].content.split():
            if part.startswith(key + "="):
                return part.split("=", 1)[1]
        return default

    async def step(messages):
        n = len(messages)
        gate = opt(messages, "gate")
        if gate is not None and int(gate) == n:
            (HERE / f"waiting-{n}").write_text(str(os.getpid()))
            while not (HERE / "gate").exists():
                await asyncio.sleep(0.01)
        await asyncio.sleep(float(opt(messages, "sleep", 0)))
        return RoleResult(f"{opt(messages, 'id', '')} round {n}", {"n": n})

    def until(messages):
        return END if len(messages) > int(opt(messages, "rounds", 10**6)) else ("a" if len(messages) % 2 else "b")
''')

PINGPONG = COMMON + "\nworkflow = WorkflowDefinition(roles={'a': step, 'b': step}, moderator=until)\n"


def make_instance(home: Path, workflows: dict[str, str], config: dict[str, Any]) -> NerveConfig:
    """Write nerve.yaml and workflows/<name>.py; return the parsed config."""
    (home / "workflows").mkdir(parents=True, exist_ok=True)
    (home / "data").mkdir(exist_ok=True)
    for name, code in workflows.items():
        (home / "workflows" / f"{name}.py").write_text(code)
    (home / "nerve.yaml").write_text(yaml.safe_dump(config))
    return NerveConfig.model_validate(config)


async def wait_for(condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    clock = IdleClock(timeout)  # idle-machine seconds: longer under load (loadclock)
    while True:
        value = condition()
        if value:
            return value
        if clock.expired():
            raise AssertionError(f"timed out after {timeout}s of idle-machine time waiting for {what}")
        await asyncio.sleep(0.02)


def manager(home: Path, config: NerveConfig, **kwargs: Any):
    """A WorkflowManager over a fresh LogStore, with test-sized timeouts; returns (mgr, logs, reports)."""
    from nerve_cli.kernel.workflows.manager import WorkflowManager

    logs = LogStore(home / "data" / "logs.db")
    reports: list[tuple[str, str]] = []
    options = {"idle_timeout": 5.0, "policy": Policy(backoff_first=0.05, backoff_max=0.5), **kwargs}
    mgr = WorkflowManager(home, config, logs, lambda level, line: reports.append((level, line)), **options)
    return mgr, logs, reports


def status_of(logs: LogStore, run_id: str) -> str | None:
    for row in workflow_runs(logs.path):
        if row["run_id"] == run_id:
            return row["status"]
    return None


def ended(logs: LogStore, *run_ids: str) -> bool:
    return all(status_of(logs, r) in ("completed", "failed", "crashed", "dropped", "cancelled") for r in run_ids)


def events(logs: LogStore, run_id: str) -> list[str]:
    return [r["type"] for r in query_logs(logs.path, source="workflow", ref=run_id)]


def seqs(logs: LogStore, run_id: str) -> list[int]:
    return [r["payload"]["seq"] for r in query_logs(logs.path, source="workflow", type="message", ref=run_id)]


def end_payload(logs: LogStore, run_id: str) -> dict:
    rows = [r for r in query_logs(logs.path, source="workflow", ref=run_id)
            if r["type"] in ("completed", "failed", "crashed", "dropped", "cancelled")]
    return rows[-1]["payload"] if rows else {}
