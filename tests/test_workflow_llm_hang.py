"""A model that never answers: `role_timeout` ends each call, the thread fails with the reason, nothing hangs.

The model is a real llm plugin (`hang`, tests/llmkit.py) loaded by the workflow worker as any installed plugin
is; its sync form blocks its thread in time.sleep, which nothing can cancel, its async form awaits forever.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from enginekit import RunningEngine, nerve, read_logs, thread_statuses, wait_for, write_instance
from llmkit import hang_model, llm_home  # noqa: F401  (fixtures)

from nerve_cli.ops.client import request

pytestmark = pytest.mark.timeout(90)

HANGS = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, llm_role

    writer = llm_role(model="hang", sync=SYNC)
    workflow = WorkflowDefinition(roles={"writer": writer}, moderator=lambda m: END if len(m) > 1 else "writer")
''')


def _status(home: Path, run_id: str) -> str | None:
    return thread_statuses(home).get(run_id)


@pytest.mark.parametrize("sync", [True, None], ids=["sync-model", "async-model"])
def test_a_model_that_never_answers_times_out_fails_the_thread_and_lets_the_engine_stop(
        home: Path, hang_model: Path, sync: bool | None) -> None:
    write_instance(home, "workflows:\n  review: {concurrency: 1, role_timeout: 300ms, role_retries: 1, "
                         "role_backoff: 100ms}\n", {})
    (home / "workflows").mkdir()
    (home / "workflows" / "review.py").write_text(HANGS.replace("SYNC", repr(sync)))
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="review", prompt="x")["run_id"]
        wait_for(lambda: _status(home, run_id) == "failed", 30, what="the thread to fail")
        # the worker is not wedged by the abandoned call: a second thread runs (and times out) as well
        second = request(home, "start_thread", workflow="review", prompt="y")["run_id"]
        wait_for(lambda: _status(home, second) == "failed", 30, what="the second thread to fail")
        code, output = engine.stop()
    assert code == 0, output
    assert len(hang_model.read_text().split()) == 4  # two attempts per thread, each reached the model
    for rid in (run_id, second):
        ended = read_logs(home, "workflow", "failed", rid)
        assert [r["payload"]["reason"] for r in ended] == [
            "role 'writer' timed out after 0.3s (role_timeout) (2 attempts)"], ended
    shown = nerve("thread", "show", run_id, home=home)
    assert "timed out after 0.3s (role_timeout)" in shown.stdout, shown.stdout
    # the abandoned call did not hold the worker: it left at the engine's shutdown request, not at its SIGTERM
    exits = [r["payload"] for r in read_logs(home, "system") if r["type"] in ("worker_exited", "worker_stopped")]
    assert [(e["workflow"], e["exit"]) for e in exits] == [("review", "exit code 0")], exits
