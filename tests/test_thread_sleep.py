"""sleep("2h") as a role result: the thread waits for time alone (no slot, no worker), across restarts."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.automaton.waits import pending_wait, sleep
from nerve_cli.ops.client import request

NAP = textwrap.dedent('''
    from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, sleep

    async def napper(messages):
        if messages[-1].role == EVENT:
            return RoleResult(f"woke after {messages[-1].meta['slept_s']}s", {})
        return sleep(messages[0].content)

    def moderator(messages):
        return "napper" if sum(1 for m in messages if m.role == "napper") < 2 else END

    workflow = WorkflowDefinition(roles={"napper": napper}, moderator=moderator)
''')


def test_sleep_refuses_what_is_not_a_duration() -> None:
    assert sleep("2h").wait.seconds == 7200
    with pytest.raises(ValueError, match="sleep: the duration must be above 0"):
        sleep(0)
    with pytest.raises(ValueError, match="sleep: the duration is seconds"):
        sleep([1])
    assert pending_wait([{"role": "napper", "content": "x", "meta": {"sleeps": {"kind": "time", "seconds": 5}}}]) \
        is not None


def test_a_sleeping_thread_holds_no_slot_and_sleeps_on_across_a_restart(home: Path) -> None:
    write_instance(home, "workflows:\n  nap: {concurrency: 1}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "nap.py").write_text(NAP)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        asleep = request(home, "start_thread", workflow="nap", prompt="3s")["run_id"]
        began = time.time()
        wait_for(lambda: status(asleep) == "waiting", 20, what="the thread asleep")
        quick = request(home, "start_thread", workflow="nap", prompt="100ms")["run_id"]  # concurrency 1: the slot is free
        wait_for(lambda: status(quick) == "completed", 20, what="a short nap beside it")
        assert status(asleep) == "waiting"
        engine.stop()
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: status(asleep) == "completed", 30, what="the sleeper to wake after the restart")
        assert time.time() - began >= 3
        contents = [r["payload"]["content"] for r in read_logs(home, "workflow", "message", asleep)]
        assert contents[1:] == ["sleeps 3s", "slept 3s", "woke after 3.0s"]
        engine.stop()
