"""Structured answers: a question declares the JSON Schema of its answer; the answer reaches the moderator as data."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from conftest import cli, nerve
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance
from textual.app import App

from nerve_cli.automaton.model import ask_person
from nerve_cli.mcp.tools import Tools
from nerve_cli.top.app import AnswerScreen

PLAN = textwrap.dedent('''
    from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

    SCHEMA = {"type": "object", "required": ["env"], "additionalProperties": False,
              "properties": {"env": {"enum": ["staging", "prod"]}, "replicas": {"type": "integer", "minimum": 1}}}

    async def planner(messages):
        return ask_person("Where to, and how many?", schema=SCHEMA)

    async def deployer(messages):
        plan = messages[-1].meta["answer"]
        return RoleResult(f"deploying to {plan['env']} x{plan.get('replicas', 1)}", {"plan": plan})

    def moderator(messages):
        last = messages[-1]
        if last.role == "__start__":
            return "planner"
        if last.role == PERSON and last.meta["approved"]:
            return "deployer"
        return END

    workflow = WorkflowDefinition(roles={"planner": planner, "deployer": deployer}, moderator=moderator)
''')



def test_an_answer_is_checked_against_the_questions_schema_and_reaches_the_moderator_as_data(home: Path) -> None:
    write_instance(home, "workflows:\n  plan: {}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "plan.py").write_text(PLAN)
    run = nerve("workflow", "run", "plan", "--prompt", "ship 2.0", home=home)  # standalone: waits
    assert run.returncode == 5, run.stdout + run.stderr
    shown = cli("thread", "show", "run-1").output
    assert "answer schema" in shown and "--answer JSON" in shown

    bad = cli("thread", "approve", "run-1", "--answer", '{"env": "qa", "replicas": 0, "x": 1}')
    assert bad.exit_code == 1
    for problem in ("'qa' is not one of ['staging', 'prod'] (at env)", "0 is less than the minimum of 1 (at replicas)",
                    "Additional properties are not allowed ('x' was unexpected)", "nothing was written"):
        assert problem in " ".join(bad.output.split()), bad.output
    missing = cli("thread", "approve", "run-1")
    assert missing.exit_code == 1 and "asks for an answer matching its JSON Schema" in " ".join(missing.output.split())
    assert cli("thread", "approve", "run-1", "--answer", "{nope").exit_code == 1
    assert thread_statuses(home) == {"run-1": "waiting"}  # every refusal wrote nothing

    answered = Tools(home).answer_thread("run-1", "approve", None, answer={"env": "staging", "replicas": 2})  # MCP's
    assert (answered["status"], answered["via"]) == ("queued", "offline")
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20, what="the answered thread")
        engine.stop()
    person, deployed = [r["payload"] for r in read_logs(home, "workflow", "message", "run-1")][-2:]
    assert person["meta"]["answer"] == {"env": "staging", "replicas": 2} and person["content"] == '{"env":"staging","replicas":2}'
    assert deployed["content"] == "deploying to staging x2"


def test_a_broken_schema_fails_the_role_that_asks() -> None:
    with pytest.raises(ValueError, match="is not a valid JSON Schema"):
        ask_person("x", schema={"type": "objekt"})
    with pytest.raises(ValueError, match="must be a JSON Schema"):
        ask_person("x", schema=["not", "a", "dict"])


def test_nerve_top_asks_for_the_answer_and_refuses_one_the_schema_refuses() -> None:
    schema = {"type": "object", "required": ["env"], "properties": {"env": {"enum": ["staging", "prod"]}}}
    got: list = []

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(AnswerScreen("run-3", "Where to?", schema), got.append)

    async def main() -> None:
        app = Host()
        async with app.run_test() as pilot:
            await pilot.pause()
            await pilot.press(*'{"env": "qa"}', "enter")
            await pilot.pause()
            problem = str(app.screen.query_one("#answer-problem").render())
            assert "'qa' is not one of ['staging', 'prod'] (at env)" in problem and got == []
            app.screen.query_one("#answer").value = ""
            await pilot.press(*'{"env": "prod"}', "enter")
            await pilot.pause()
            assert got == [{"env": "prod"}]

    asyncio.run(main())
