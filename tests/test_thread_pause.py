"""Pause and resume a thread: no round starts and no slot is held while paused, across engine restarts; an event
its wait matched meanwhile resumes it only once it is resumed."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.errors import WorkflowError
from nerve_cli.ops.client import request
from nerve_cli.ops.workflows.control import pause_thread
from nerve_cli.ops.workflows.rebuild import doctor

WORK = textwrap.dedent('''
    import asyncio
    from pathlib import Path
    from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, wait_for_event

    HERE = Path(__file__).resolve().parent.parent

    async def work(messages):
        mode = messages[0].content
        rounds = sum(1 for m in messages if m.role == "work")
        if mode == "wait" and rounds == 0:
            return wait_for_event("ci.done", match={"pr": 7})
        while mode == "hold" and rounds == 0 and not (HERE / "gate").exists():
            (HERE / "holding").write_text("1")
            await asyncio.sleep(0.01)
        said = messages[-1].meta.get("payload") if messages[-1].role == EVENT else None
        return RoleResult(f"round {rounds + 1}" + (f" after {said}" if said else ""), {})

    def moderator(messages):
        return "work" if sum(1 for m in messages if m.role == "work") < 2 else END

    workflow = WorkflowDefinition(roles={"work": work}, moderator=moderator)
''')


def _instance(home: Path) -> None:
    write_instance(home, "workflows:\n  work: {concurrency: 1}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "work.py").write_text(WORK)


def _start(home: Path, prompt: str) -> str:
    return request(home, "start_thread", workflow="work", prompt=prompt)["run_id"]


def _rounds(home: Path, run_id: str) -> list[str]:
    return [r["payload"]["content"] for r in read_logs(home, "workflow", "message", run_id)
            if r["payload"]["role"] == "work"]


def _transitions(home: Path, run_id: str) -> list[str]:
    """What nerve-threads signalled for the thread, in order."""
    with sqlite3.connect(home / "data" / "senses" / "nerve-threads.db") as conn:
        rows = conn.execute("SELECT payload FROM _signals ORDER BY id").fetchall()
    return [p["transition"] for p in map(json.loads, (r[0] for r in rows)) if p["run_id"] == run_id]


def _agrees(home: Path) -> None:
    assert doctor(home).differences == []


def test_a_running_thread_pauses_after_its_round_and_stays_paused_across_a_restart(home: Path) -> None:
    _instance(home)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        held = _start(home, "hold")
        wait_for(lambda: (home / "holding").exists(), 20, what="the thread's first round running")
        behind = _start(home, "plain")  # concurrency 1: queued behind it
        assert status(behind) == "queued"
        pausing = json.loads(cli("thread", "pause", held, "--json").output)
        assert pausing == {"version": 1, "run_id": held, "status": "pausing", "was": "started", "via": "engine"}
        (home / "gate").write_text("")  # its round finishes...
        wait_for(lambda: status(held) == "paused", 20, what="the thread paused after its round")
        assert _rounds(home, held) == ["round 1"]  # ...and no next round began
        # its slot is free: the thread behind it runs to its end
        wait_for(lambda: status(behind) == "completed", 20, what="the queued thread to take the free slot")
        time.sleep(0.3)
        assert (status(held), _rounds(home, held)) == ("paused", ["round 1"])
        _agrees(home)
        again = cli("thread", "pause", held)
        assert again.exit_code == 1 and f"{held} is already paused" in again.output
        engine.stop()

    with RunningEngine(home) as engine:  # a restart does not run it
        engine.wait_ready(groups=0)
        assert engine.status()["workflows"]["work"]["paused"] == [held]
        time.sleep(0.5)
        assert (status(held), _rounds(home, held)) == ("paused", ["round 1"])
        resumed = json.loads(cli("thread", "resume", held, "--json").output)
        assert (resumed["status"], resumed["was"], resumed["via"]) in {("started", "paused", "engine"),
                                                                       ("queued", "paused", "engine")}
        wait_for(lambda: status(held) == "completed", 20, what="the resumed thread to complete")
        assert _rounds(home, held) == ["round 1", "round 2"]
        # nerve-threads signals the transitions in order, maybe over several computes: wait for the last one
        wait_for(lambda: "completed" in _transitions(home, held), 20,
                 what="nerve-threads to signal the resume and the completion")
        transitions = _transitions(home, held)
        assert transitions.index("paused") < transitions.index("resumed") < transitions.index("completed")
        _agrees(home)
        engine.stop()


def test_an_event_during_the_pause_resumes_the_thread_only_after_resume(home: Path) -> None:
    _instance(home)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        waiting = _start(home, "wait")
        wait_for(lambda: status(waiting) == "waiting", 20, what="the thread waiting for ci.done")
        assert pause_thread(home, waiting, via="test") == {"run_id": waiting, "status": "paused", "was": "waiting",
                                                         "via": "engine"}
        request(home, "emit", channel="ci.done", payload={"pr": 8})
        request(home, "emit", channel="ci.done", payload={"pr": 7, "state": "green"})
        time.sleep(0.5)
        assert (status(waiting), _rounds(home, waiting)) == ("paused", ["waits for ci.done where pr = 7"])
        engine.stop()

    assert thread_statuses(home)[waiting] == "paused"  # offline: still paused; resumed there, it waits again
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        time.sleep(0.3)
        assert status(waiting) == "paused"
        assert cli("thread", "resume", waiting).exit_code == 0
        wait_for(lambda: status(waiting) == "completed", 20, what="the event kept during the pause to resume it")
        assert _rounds(home, waiting)[-1] == "round 2 after {'pr': 7, 'state': 'green'}"
        _agrees(home)
        engine.stop()


def test_pause_and_resume_with_no_engine_and_what_cannot_be_paused(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        waiting = _start(home, "wait")
        wait_for(lambda: thread_statuses(home).get(waiting) == "waiting", 20, what="a waiting thread")
        engine.stop()
    assert pause_thread(home, waiting, via="test")["status"] == "paused"
    with pytest.raises(WorkflowError, match="already paused"):
        pause_thread(home, waiting, via="test")
    assert pause_thread(home, waiting, via="test", resume=True) == {"run_id": waiting, "status": "waiting",
                                                                  "via": "offline"}
    with pytest.raises(WorkflowError, match="is waiting, not paused"):
        pause_thread(home, waiting, via="test", resume=True)
    _agrees(home)
    missing = cli("thread", "pause", "run-999")
    assert missing.exit_code == 1 and "no thread run-999" in missing.output
