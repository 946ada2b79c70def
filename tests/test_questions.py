"""Every approval a model's turn asks for: one question per call, each with its id, answered in any order.

llm-echo proposes three calls needing approval in one turn; a person answers them one by one, across an
engine restart and with the engine stopped; the model is resumed once with every result. Workflows may ask
for more than one approver, and refuse the person who started the thread (`self_approval: false`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance
from llmkit import llm_home, tool_results  # noqa: F401  (fixture)
from otlpkit import Receiver

from nerve_cli.ops.client import request

AGENT = textwrap.dedent('''
    from pathlib import Path
    from nerve_cli.sdk import END, WorkflowDefinition, llm_role, tool

    HERE = Path(__file__).resolve().parent.parent

    def _did(what: str) -> str:
        with open(HERE / "done.txt", "a") as fh:
            fh.write(what + "\\n")
        return what

    def merge_pr(number: int) -> str:
        """Merge a pull request."""
        return _did(f"merged {number}")

    def deploy(env: str) -> str:
        """Deploy to an environment."""
        return _did(f"deployed {env}")

    agent = llm_role(model="echo", prompt=lambda m: m[0].content,
                     tools=[tool(merge_pr, approval=True), tool(deploy, approval=True)])
    workflow = WorkflowDefinition(roles={"agent": agent},
                                  moderator=lambda m: "agent" if m[-1].role == "__start__" else END)
''')
GATE = textwrap.dedent('''
    from nerve_cli.sdk import END, PERSON, WorkflowDefinition, ask_person

    async def asker(messages):
        return ask_person("Ship it?")

    def moderator(messages):
        return "asker" if messages[-1].role == "__start__" else END

    workflow = WorkflowDefinition(roles={"asker": asker}, moderator=moderator)
''')
CALLS = json.dumps({"prompt": "go", "tool_calls": [
    {"name": "merge_pr", "arguments": {"number": 1}}, {"name": "merge_pr", "arguments": {"number": 2}},
    {"name": "deploy", "arguments": {"env": "prod"}}]})


def _nerve(home: Path, *args: str, by: str = "Ada") -> subprocess.CompletedProcess:
    """The CLI as a person named `by` (git's user.name, given through git's environment)."""
    env = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": by}
    return subprocess.run([sys.executable, "-m", "nerve_cli", *args, "--home", str(home)], capture_output=True,
                          text=True, timeout=60, env=env)


def _show(home: Path, run_id: str) -> dict:
    shown = _nerve(home, "thread", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _answer(home: Path, verb: str, run_id: str, *args: str, by: str = "Ada") -> dict:
    done = _nerve(home, "thread", verb, run_id, *args, "--json", by=by)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.timeout(150)
def test_three_calls_in_one_turn_are_three_questions_answered_in_any_order_across_a_restart(
        tmp_path: Path, llm_home: Path) -> None:
    home = write_instance(tmp_path / "home", "workflows:\n  agent: {idempotent: true}\n", {})
    (home / "workflows").mkdir()
    (home / "workflows" / "agent.py").write_text(AGENT)
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready(groups=0)
            run_id = request(home, "start_thread", workflow="agent", prompt=CALLS)["run_id"]
            wait_for(lambda: thread_statuses(home).get(run_id) == "waiting", 60, what="the thread to ask")
            asked = _show(home, run_id)["waiting_for"]["questions"]
            assert [(q["id"], q["call"]["name"], q["call"]["arguments"]) for q in asked] == [
                ("q1", "merge_pr", {"number": 1}), ("q2", "merge_pr", {"number": 2}), ("q3", "deploy", {"env": "prod"})]
            assert asked[2]["question"].startswith('Allow the tool call deploy({"env":"prod"})?')
            first = _answer(home, "approve", run_id, "--question", "q2")
            assert (first["status"], first["answered"], first["open"]) == ("waiting", ["q2"], ["q1", "q3"])
            engine.stop()
        # the engine stopped between answers: the same answer path writes the vote for the next engine
        second = _answer(home, "reject", run_id, "--question", "q3", "--note", "not prod today")
        assert (second["via"], second["status"], second["open"]) == ("offline", "waiting", ["q1"])
        assert [q["id"] for q in _show(home, run_id)["waiting_for"]["questions"]] == ["q1"]
        refused = _nerve(home, "thread", "approve", run_id, "--question", "q3")
        assert refused.returncode == 1 and "question 'q3' was settled already (open: q1" in refused.stderr
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready(groups=0)
            wait_for(lambda: thread_statuses(home).get(run_id) == "waiting", 30, what="the thread to wait on")
            last = _answer(home, "approve", run_id, "--question", "q1")
            assert (last["resumes"], last["open"]) == (True, [])
            wait_for(lambda: thread_statuses(home).get(run_id) == "completed", 60, what="the thread to finish")
            wait_for(lambda: any(s.name == "thread agent" and s.end_ns for s in receiver.spans), 60,
                     what="the thread's spans")
            engine.stop()
    # each approved call ran once, the rejected one never (an async role runs a turn's calls at once: any order)
    assert sorted((home / "done.txt").read_text().split("\n")[:-1]) == ["merged 1", "merged 2"]
    messages = [r["payload"] for r in read_logs(home, "workflow", "message", run_id)]
    assert [m["role"] for m in messages] == ["__start__", "agent", "__person__", "__person__", "__person__",
                                             "__tool__", "agent"]
    votes = [(m["meta"]["question"], m["meta"]["decision"], m["meta"]["via"]) for m in messages[2:5]]
    assert votes == [("q2", "approve", "nerve thread approve"), ("q3", "reject", "nerve thread reject"),
                     ("q1", "approve", "nerve thread approve")]
    # the model was resumed once, with all three results
    assert tool_results(messages[-1]["content"]) == ["merged 1", "merged 2", "Rejected by a person: not prod today"]
    assert messages[-1]["content"].count('"tool_results"') == 1
    executed = sorted(s.attributes.get("gen_ai.tool.name") for s in receiver.spans if s.name.startswith("execute_tool"))
    assert executed == ["merge_pr", "merge_pr"]


def test_two_approvers_count_distinct_people_and_the_starter_may_not_approve(tmp_path: Path) -> None:
    home = write_instance(tmp_path / "home", "workflows:\n  gate: {approvers: 2, self_approval: false}\n", {})
    (home / "workflows").mkdir()
    (home / "workflows" / "gate.py").write_text(GATE)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="gate", prompt="v1.2", origin={"by": "Ada"})["run_id"]
        wait_for(lambda: thread_statuses(home).get(run_id) == "waiting", 30, what="the thread to ask")
        mine = _nerve(home, "thread", "approve", run_id, by="Ada")
        assert mine.returncode == 1 and "Ada started" in mine.stderr and "self_approval is false" in mine.stderr
        one = _answer(home, "approve", run_id, by="Bob")
        assert (one["status"], one["settled"], one["open"]) == ("waiting", [], ["q1"])
        assert _show(home, run_id)["waiting_for"]["questions"][0]["approvals"] == ["Bob"]
        twice = _nerve(home, "thread", "approve", run_id, by="Bob")
        assert twice.returncode == 1 and "Bob has approved" in twice.stderr and "1 more approval" in twice.stderr
        assert thread_statuses(home)[run_id] == "waiting"
        two = _answer(home, "approve", run_id, "--note", "lgtm", by="Cy")
        assert (two["settled"], two["resumes"]) == (["q1"], True)
        wait_for(lambda: thread_statuses(home).get(run_id) == "completed", 30, what="the approved thread to end")
        engine.stop()
    person = [r["payload"] for r in read_logs(home, "workflow", "message", run_id)][2:]
    assert [(m["meta"]["by"], m["meta"]["settles"]) for m in person] == [("Bob", False), ("Cy", True)]
