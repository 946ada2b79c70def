"""One supervision policy for every worker: sense groups, workflow workers and the CLI's one-off worker,
with the back-off nerve.yaml sets (workflow workers used a fixed one before)."""

from __future__ import annotations

from pathlib import Path

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.supervision.policy import Limits, Policy
from nerve_cli.kernel.supervision.supervisor import GroupSupervisor
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.logs import LogStore


def config(**engine: object) -> NerveConfig:
    return NerveConfig.model_validate({"engine": engine, "senses": {"a": {"timeout": "2s", "grace_period": "1s"}},
                                       "reflexes": [{"sense": "a", "interval": "1m"}]})


def test_the_back_off_doubles_from_first_to_max_and_a_stable_worker_starts_over() -> None:
    policy = Policy.of(config(respawn_backoff_first="300ms", respawn_backoff_max="1s").engine)
    assert [policy.backoff(n) for n in range(5)] == [0.0, 0.3, 0.6, 1.0, 1.0]
    assert policy.failures_after(3, lived=0.5) == 4
    assert policy.failures_after(3, lived=policy.stable_after) == 0
    assert Policy.limits(config().senses["a"]) == Limits(2.0, 1.0) and Limits(2.0, 1.0).hard == 3.0
    assert Policy.limits(None) == Limits()


def test_workflow_workers_and_sense_groups_follow_the_same_keys(tmp_path: Path) -> None:
    cfg = config(respawn_backoff_first="2s", respawn_backoff_max="8s")
    with LogStore(tmp_path / "logs.db") as logs:
        manager = WorkflowManager(tmp_path, cfg, logs, lambda level, line: None)
        assert manager.spawner.policy.backoff(1) == 2.0 and manager.spawner.policy.backoff(9) == 8.0
        manager.update_config(config(respawn_backoff_first="1s"))  # a reload of nerve.yaml
        assert manager.spawner.policy.backoff(1) == 1.0
    group = GroupSupervisor("default", ["a"], tmp_path, cfg, hooks=None)  # type: ignore[arg-type]
    assert group.policy == manager.spawner.policy.__class__.of(cfg.engine)
    group.config = config(respawn_backoff_first="1s")
    assert group.policy.backoff(1) == 1.0
