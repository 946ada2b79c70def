"""nerve workflow check: a definition checked as a whole, every problem at once with file:line; nerve mesh draws
the waits and gates the definitions declare."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from conftest import cli
from contractkit import Checked
from enginekit import write_instance

from nerve_cli.config import definitions
from nerve_cli.config.problems import Problem
from nerve_cli.ops.workflows.check import check_workflows

BROKEN = textwrap.dedent('''
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition, ask_person, llm_role, tool, wait_for_event

    def lookup(pr):
        return pr

    async def writer(messages):
        return RoleResult("draft", {})

    async def asker(messages):
        return ask_person("ship?", schema={"type": "objekt"})

    async def waiter(messages):
        return wait_for_event("pr", match={"n": 1})

    bot = llm_role(model="echo", tools=[lookup])

    def moderator(messages, extra):
        return "writr" if len(messages) < 3 else END

    workflow = WorkflowDefinition(roles={"writer": writer, "asker": asker, "waiter": waiter, "bot": bot,
                                         "__person__": writer}, moderator=moderator)
''')
GATED = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, ask_person, llm_role, tool, wait_for_event

    def merge(number: int) -> str:
        """Merge a pull request."""
        return "merged"

    async def opener(messages):
        return wait_for_event("ci.done", match={"pr": 7})

    async def asker(messages):
        return ask_person("merge?")

    bot = llm_role(model="echo", tools=[tool(merge, approval=True)])

    workflow = WorkflowDefinition(roles={"opener": opener, "asker": asker, "bot": bot}, moderator=lambda m: END)
''')



def _instance(home: Path, concurrency: int = 0) -> None:
    write_instance(home, """
        senses:
          prs: {}
        reflexes:
          - {sense: prs, interval: 1h}
        workflows:
          broken: {}
          gated: {}
          missing: {concurrency: CONCURRENCY}
    """.replace("CONCURRENCY", str(concurrency)), {"prs": "def compute(db, peers):\n    return 1\n"})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "broken.py").write_text(BROKEN)
    (home / "workflows" / "gated.py").write_text(GATED)


def test_every_problem_of_every_definition_at_once_with_its_line(home: Path) -> None:
    _instance(home)
    result = cli("workflow", "check")
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith(("workflows/", "nerve.yaml"))]
    expected = [
        "nerve.yaml:9: error: workflows.missing: no definition: none of workflows/missing.py, "
        "workflows/missing.pipeline.yaml, workflows/missing.pipeline.yml, workflows/missing.pipeline.json exists",
        "nerve.yaml:9: error: workflows.missing.concurrency: expected a number ≥ 1, got 0",
        "workflows/broken.py:4: warning: workflows.broken: role 'bot': tool 'lookup' has no docstring",
        "workflows/broken.py:4: warning: workflows.broken: role 'bot': tool 'lookup' has arguments without a type (pr)",
        "workflows/broken.py:11: error: workflows.broken: ask_person(schema=...) is not a valid JSON Schema",
        "workflows/broken.py:14: warning: workflows.broken: wait_for_event('pr') waits for 'pr', which nerve.yaml "
        "names nowhere (no sense, channel or reflex): did you mean 'prs'?",
        "workflows/broken.py:18: error: workflows.broken: moderator takes 2 required arguments (messages, extra)",
        "workflows/broken.py:19: error: workflows.broken: the moderator returns 'writr', which is not a role",
        "workflows/broken.py:21: error: workflows.broken: role name '__person__' is reserved",
    ]
    assert len(lines) == len(expected), result.output
    for line, start in zip(lines, expected):
        assert line.startswith(start), (line, start)
    assert "3 workflows checked: 6 errors, 3 warnings" in result.output

    checked = Checked()
    doc = checked.doc("workflow-check", json.loads(cli("workflow", "check", "broken", "--json").output), "check")
    assert doc["valid"] is False and doc["workflows"] == [
        {"name": "broken", "kind": "python", "file": "workflows/broken.py", "errors": 4, "warnings": 3}]
    assert cli("workflow", "check", "gated").exit_code == 0
    unknown = cli("workflow", "check", "gatd")
    assert unknown.exit_code == 1 and "did you mean `gated`" in unknown.output
    # config check runs the same checks (nerve.yaml's, then, once it is valid, the code)
    _instance(home, concurrency=1)
    config = cli("config", "check")
    assert "workflows/broken.py:19: error: workflows.broken: the moderator returns 'writr'" in config.output


def test_a_pipeline_and_another_kind_of_definition_are_checked_by_their_own_checker(home: Path) -> None:
    _instance(home)
    (home / "workflows" / "missing.pipeline.yaml").write_text(
        "steps:\n  - id: a\n    who: person\n    neds: [b]\n  - id: b\n    who: model\n    needs: [c]\n")
    report = check_workflows(home, "missing")
    assert [str(p).split(";")[0] for p in report.problems] == [
        "nerve.yaml:9: workflows.missing.concurrency: expected a number ≥ 1, got 0",
        "workflows/missing.pipeline.yaml:4: steps[0].neds: unknown step key `neds`",
        "workflows/missing.pipeline.yaml:5: steps[1]: a `who: model` step needs `do`: what to ask the model",
        "workflows/missing.pipeline.yaml:7: steps[1].needs[0]: step `b` needs `c`, which is not a step"]
    assert report.workflows == [{"name": "missing", "kind": "pipeline", "file": "workflows/missing.pipeline.yaml",
                                 "errors": 4, "warnings": 0}]

    (home / "workflows" / "missing.pipeline.yaml").unlink()
    (home / "workflows" / "missing.flow.json").write_text("{}")
    seen = []

    def check_flows(root: Path, names: list[str], senses: list[str]) -> list[Problem]:
        seen.append((names, senses))
        return [Problem("workflows.missing", "flow is empty", "error", 1, file="workflows/missing.flow.json")]

    definitions.register(definitions.DefinitionKind("flow", (".flow.yaml", ".flow.json"), check_flows))
    try:
        report = check_workflows(home, "missing")
    finally:
        definitions.KINDS.pop("flow")
    assert seen == [(["missing"], ["prs"])]
    assert [str(p) for p in report.problems][-1] == "workflows/missing.flow.json:1: workflows.missing: flow is empty"
    assert report.workflows == [{"name": "missing", "kind": "flow", "file": "workflows/missing.flow.json",
                                 "errors": 2, "warnings": 0}]


def test_mesh_draws_what_workflows_wait_for_and_who_they_ask(home: Path) -> None:
    _instance(home, concurrency=1)
    mesh = json.loads(cli("mesh", "--json").output)
    edges = {(e["source"], e["target"], e["kind"], e["label"]) for e in mesh["edges"] if e["kind"] in ("wait", "gate")}
    assert edges == {("channel:ci.done", "workflow:gated", "wait", "waited for (match pr)"),
                     ("workflow:gated", "person", "gate", "asks a person; merge call needs approval"),
                     ("workflow:broken", "person", "gate", "asks a person"),
                     ("channel:pr", "workflow:broken", "wait", "waited for (match n)")}
    tree = cli("mesh").output
    assert "⏸ gated (workflow) (waited for (match pr))  ✋ asks a person; merge call needs approval" in tree


def test_a_wait_on_a_misspelt_channel_is_warned_with_the_channel_it_likely_means(home: Path) -> None:
    """`wait_for_event("ci.dnoe")` beside a declared `ci.done` got no warning and waited out its timeout."""
    write_instance(home, """
        senses:
          prs: {}
        reflexes:
          - {sense: prs, on: [review.posted]}
        channels:
          ci.done: {}
        workflows:
          waits: {}
    """, {"prs": "def compute(db, peers):\n    return 1\n"})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "waits.py").write_text(textwrap.dedent('''
        from nerve_cli.sdk import END, WorkflowDefinition, wait_for_event

        async def waiter(messages):
            if len(messages) == 1:
                return wait_for_event("ci.dnoe", timeout="1m")
            return wait_for_event("review.postd", timeout="1m")

        def moderator(messages):
            return "waiter" if len(messages) < 3 else END

        workflow = WorkflowDefinition(roles={"waiter": waiter}, moderator=moderator)
    '''))
    for args in (["workflow", "check"], ["config", "check"]):
        result = cli(*args)
        assert "wait_for_event('ci.dnoe') waits for 'ci.dnoe'" in result.output and "did you mean 'ci.done'?" in \
            result.output, (args, result.output)
        assert "did you mean 'review.posted'?" in result.output, (args, result.output)
