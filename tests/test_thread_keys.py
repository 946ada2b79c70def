"""One thread per key (workflows.W.concurrency_key): key-mates run one at a time beside other keys; `drop`
refuses a taken key; `replace` cancels the holder (superseded by the new thread) and runs the new one."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.ops.client import request

WORK = textwrap.dedent('''
    import asyncio, json
    from pathlib import Path
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    HERE = Path(__file__).resolve().parent.parent

    async def work(messages):
        ask = json.loads(messages[0].content)
        while ask.get("hold") and not (HERE / "gate").exists():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        return RoleResult("done", {})

    def moderator(messages):
        return "work" if len(messages) == 1 else END

    workflow = WorkflowDefinition(roles={"work": work}, moderator=moderator)
''')


def _instance(home: Path) -> None:
    write_instance(home, """
    workflows:
      review: {concurrency: 5, concurrency_key: prompt.pr}
      once: {concurrency: 5, concurrency_key: prompt.pr, key_overflow: drop}
      latest: {concurrency: 5, concurrency_key: prompt.pr, key_overflow: replace, cancel_grace: 5s}
    """, {})
    (home / "workflows").mkdir(exist_ok=True)
    for name in ("review", "once", "latest"):
        (home / "workflows" / f"{name}.py").write_text(WORK)


def _start(home: Path, workflow: str, **prompt: object) -> str:
    return request(home, "start_thread", workflow=workflow, prompt=json.dumps(prompt))["run_id"]


def _span(home: Path, run_id: str) -> tuple[int, int]:
    started = read_logs(home, "workflow", "started", run_id)[0]["ts"]
    ended = read_logs(home, "workflow", "completed", run_id)[-1]["ts"]
    return started, ended


def test_key_mates_run_one_at_a_time_beside_other_keys(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        sevens = [_start(home, "review", pr=7, n=n) for n in range(3)]
        eights = [_start(home, "review", pr=8, n=n) for n in range(2)]
        assert [thread_statuses(home)[r] for r in sevens] == ["started", "queued", "queued"]
        assert [thread_statuses(home)[r] for r in eights] == ["started", "queued"]
        wait_for(lambda: all(thread_statuses(home)[r] == "completed" for r in sevens + eights), 30,
                 what="every thread to complete")
        for mates in (sevens, eights):
            spans = [_span(home, r) for r in mates]
            assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans  # one at a time, in order
        first_eight = _span(home, eights[0])
        assert first_eight[0] < _span(home, sevens[0])[1]  # pr 8 ran beside pr 7
        engine.stop()


def test_drop_refuses_a_taken_key_and_replace_supersedes_the_holder(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        first = _start(home, "once", pr=1)
        again = request(home, "start_thread", workflow="once", prompt=json.dumps({"pr": 1}))
        assert again["status"] == "dropped"
        reason = read_logs(home, "workflow", "dropped", again["run_id"])[0]["payload"]["reason"]
        assert reason == f"its concurrency_key prompt.pr = 1 is held by {first} (key_overflow: drop)"
        assert _start(home, "once", pr=2)  # another key runs

        old = _start(home, "latest", pr=3, hold=True)
        wait_for(lambda: thread_statuses(home).get(old) == "started", 20, what="the holder running")
        new = _start(home, "latest", pr=3)
        wait_for(lambda: thread_statuses(home).get(old) == "cancelled", 20, what="the holder superseded")
        ended = read_logs(home, "workflow", "cancelled", old)[-1]["payload"]
        assert ended["reason"] == f"superseded by {new}"
        wait_for(lambda: thread_statuses(home).get(new) == "completed", 20, what="the new thread to run")
        wait_for(lambda: thread_statuses(home)[first] == "completed", 20, what="the first key holder to complete")
        engine.stop()
