"""Thread control: cancel a queued, waiting or running thread; run one again, whole or from a round."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.errors import WorkflowError
from nerve_cli.instance.git import person
from nerve_cli.ops.client import request
from nerve_cli.ops.workflows.control import cancel_thread, rerun_thread
from nerve_cli.ops.workflows.rebuild import doctor

WORK = textwrap.dedent('''
    import asyncio, signal, time
    from pathlib import Path
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition, ask_person

    HERE = Path(__file__).resolve().parent.parent

    async def work(messages):
        mode = messages[0].content
        if mode == "ask":
            return ask_person("go?")
        if mode == "block":  # blocks the worker's loop: a cancel cannot reach the role
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # and its worker outlives the TERM: a KILL ends it
            (HERE / "blocking").write_text("1")
            time.sleep(60)
        while mode == "hold" and not (HERE / "gate").exists():
            (HERE / "holding").write_text("1")
            await asyncio.sleep(0.01)
        return RoleResult(f"worked on {messages[-1].content}", {})

    def moderator(messages):
        return "work" if sum(1 for m in messages if m.role == "work") < 2 else END

    workflow = WorkflowDefinition(roles={"work": work}, moderator=moderator)
''')



def _agrees(home: Path) -> None:
    """`nerve doctor`: workflow_runs says what the logs say."""
    report = doctor(home)
    assert report.differences == [], report.differences


def _contents(home: Path, run_id: str) -> list[str]:
    return [r["payload"]["content"] for r in read_logs(home, "workflow", "message", run_id)]


def test_cancel_a_queued_a_waiting_and_a_running_thread_then_run_them_again(home: Path) -> None:
    write_instance(home, "workflows:\n  work: {concurrency: 1, cancel_grace: 300ms}\n", {})
    me = person(home)  # who cancels and reruns, for the record
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "work.py").write_text(WORK)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    start = lambda prompt: request(home, "start_thread", workflow="work", prompt=prompt)["run_id"]  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        asking = start("ask")
        wait_for(lambda: status(asking) == "waiting", 20, what="a thread waiting for a person")
        holding = start("hold")
        wait_for(lambda: (home / "holding").exists(), 20, what="a thread running")
        queued = start("plain")
        assert status(queued) == "queued"  # concurrency 1: behind the running one

        done = cli("thread", "cancel", queued, "--reason", "not today", "--json")
        assert json.loads(done.output) == {"version": 1, "run_id": queued, "status": "cancelled", "was": "queued",
                                           "via": "engine"}
        _agrees(home)
        assert cancel_thread(home, asking, None, via="test")["was"] == "waiting"
        _agrees(home)
        assert cancel_thread(home, holding, "stop it", via="test")["status"] == "cancelling"
        wait_for(lambda: status(holding) == "cancelled", 20, what="the running thread to be cancelled")
        _agrees(home)
        ends = {r: read_logs(home, "workflow", "cancelled", r)[-1]["payload"] for r in (queued, asking, holding)}
        assert [(p["reason"], p["was"], p["by"], p["via"]) for p in ends.values()] == [
            ("not today", "queued", me, "nerve thread cancel"), (f"cancelled by {me}", "waiting", me, "test"),
            ("stop it", "started", me, "test")]

        blocked = start("block")
        wait_for(lambda: (home / "blocking").exists(), 20, what="a role blocking its worker")
        assert cancel_thread(home, blocked, None, via="test")["status"] == "cancelling"
        wait_for(lambda: status(blocked) == "cancelled", 20, what="cancel_grace to end the blocked thread")
        reason = read_logs(home, "workflow", "cancelled", blocked)[-1]["payload"]["reason"]
        assert reason == f"cancelled by {me} (its role did not stop within cancel_grace 300ms: its worker was stopped)"
        _agrees(home)

        (home / "gate").write_text("")
        # started while the stuck worker is still being stopped: it waits for a fresh worker, not dies with that one
        again = rerun_thread(home, holding, None, None, via="test")["run_id"]
        wait_for(lambda: status(again) == "completed", 20, what="the rerun to complete")
        origin = read_logs(home, "workflow", "queued", again)[0]["payload"]["origin"]
        assert origin == {"kind": "rerun", "of": holding, "by": me, "via": "test"}
        forked = json.loads(cli("thread", "rerun", again, "--from-round", "1", "--message", "edited", "--json").output)
        assert (forked["rerun_of"], forked["via"]) == (again, "engine")
        wait_for(lambda: status(forked["run_id"]) == "completed", 20, what="the fork to complete")
        assert _contents(home, forked["run_id"]) == ["hold", "edited", "worked on edited"]
        assert _contents(home, again) == ["hold", "worked on hold", "worked on worked on hold"]
        _agrees(home)

        ended = cli("thread", "cancel", again)
        assert ended.exit_code == 1
        assert f"{again} is completed: only a queued, running or waiting thread can be cancelled" in ended.output
        with pytest.raises(WorkflowError, match="has 2 round\\(s\\): --from-round takes 0 to 2"):
            rerun_thread(home, again, 3, None, via="test")
        engine.stop()

    offline = rerun_thread(home, forked["run_id"], 0, "a new prompt", via="test")
    assert (offline["status"], offline["via"]) == ("queued", "offline")
    assert _contents(home, offline["run_id"]) == ["a new prompt"]
    assert cancel_thread(home, offline["run_id"], None, via="test") == {
        "run_id": offline["run_id"], "status": "cancelled", "was": "queued", "via": "offline"}
    _agrees(home)
    listed = json.loads(cli("thread", "list", "--status", "cancelled", "--json").output)["threads"]
    assert {t["run_id"] for t in listed} == {queued, asking, holding, blocked, offline["run_id"]}
