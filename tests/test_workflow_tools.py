"""Model-backed roles that call tools (llm's tools API), offline: llm-echo calls the tools its JSON prompt names."""

from __future__ import annotations

import asyncio
import json
import signal
import textwrap
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, last_signal, read_logs, thread_statuses, wait_for, write_instance
from llmkit import llm_home, tool_results  # noqa: F401  (fixture)

from nerve_cli.automaton.context import ThreadInfo, enter_thread
from nerve_cli.automaton.model import START, AskPerson, RoleSetupError, WorkflowMessage
from nerve_cli.contract.threads import thread_show
from nerve_cli.ops.client import request
from nerve_cli.ops.workflows.gates import answer_thread
from nerve_cli.ops.workflows.threads import thread_detail
from nerve_cli.roles.llm import llm_role
from nerve_cli.roles.tools import tool
from nerve_cli.schema.diff import generate_migration

PRS_SCHEMA = textwrap.dedent('''
    from nerve_cli.sdk import table

    @table(pk="number")
    class Pr:
        number: int
        title: str
''')
PRS = textwrap.dedent('''
    from .schema import Pr

    def compute(db, peers):
        db.upsert(Pr(number=7, title="fix the build"))
        db.upsert(Pr(number=8, title="add tools"))
        return 2
''')
AGENT = textwrap.dedent('''
    import time
    from pathlib import Path
    from nerve_cli.sdk import END, WorkflowDefinition, llm_role, nerve_tools, tool

    HERE = Path(__file__).resolve().parent.parent

    def flaky(n: int) -> str:
        """Fails, always."""
        raise RuntimeError(f"flaky {n} broke")

    def deploy(env: str) -> str:
        """Deploy the service to an environment."""
        with open(HERE / "deploys.txt", "a") as fh:
            fh.write(env + "\\n")
        if (HERE / "deploy-hold").exists():
            (HERE / "deploy-started").write_text(env)
            while not (HERE / "deploy-gate").exists():
                time.sleep(0.01)
        return f"deployed {env}"

    def first_prompt(messages):
        return messages[0].content if len(messages) == 1 else "carry on"

    agent = llm_role(model="echo", prompt=first_prompt,
                     tools=[*nerve_tools.READ_ONLY, nerve_tools.emit, flaky, tool(deploy, approval=True)])

    def moderator(messages):
        return "agent" if messages[-1].role == "__start__" else END

    workflow = WorkflowDefinition(roles={"agent": agent}, moderator=moderator)
''')


def _calls(*calls: tuple[str, dict]) -> str:
    return json.dumps({"prompt": "go", "tool_calls": [{"name": n, "arguments": a} for n, a in calls]})


def _messages(home: Path, run_id: str) -> list[dict]:
    return [r["payload"] for r in read_logs(home, "workflow", "message", run_id)]


def _deploys(home: Path) -> list[str]:
    path = home / "deploys.txt"
    return path.read_text().split() if path.exists() else []


def test_a_role_calls_tools_records_each_call_and_a_person_allows_or_refuses_a_risky_one(
        home: Path, llm_home: Path) -> None:
    write_instance(home, """
        senses:
          prs: {}
        reflexes:
          - {sense: prs, interval: 1h}
        workflows:
          agent: {concurrency: 2, idempotent: true}
    """, {"prs": PRS}, {"prs": PRS_SCHEMA})
    assert generate_migration(home / "senses" / "prs") is not None
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "agent.py").write_text(AGENT)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    start = lambda prompt: request(home, "start_thread", workflow="agent", prompt=prompt)["run_id"]  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: last_signal(home, "prs") == 2, 20, what="the prs sense to store its rows")
        looked = start(_calls(("query_sense", {"sense": "prs", "sql": "select number, title from pr order by 1"}),
                              ("flaky", {"n": 3}), ("recent_signals", {"sense": "prs"}),
                              ("emit", {"channel": "deploys.asked", "payload": {"n": 1}, "key": "ask-1"}),
                              ("list_senses", {})))
        refused, allowed, killed = (start(_calls(("deploy", {"env": env}))) for env in ("prod", "staging", "canary"))
        wait_for(lambda: status(looked) == "completed", 30, what="the thread calling tools to end")
        wait_for(lambda: all(status(r) == "waiting" for r in (refused, allowed, killed)), 30,
                 what="three threads asking to deploy")

        query, failing, signals, emitted, senses = _messages(home, looked)[1]["meta"]["tool_calls"]
        assert query["name"] == "query_sense" and query["result"]["rows"] == [[7, "fix the build"], [8, "add tools"]]
        assert query["result"]["columns"] == ["number", "title"] and query["duration_ms"] >= 0
        assert failing == {"id": failing["id"], "name": "flaky", "arguments": {"n": 3}, "error": "RuntimeError: flaky 3 broke",
                           "started_ms": failing["started_ms"], "duration_ms": failing["duration_ms"]}
        assert [s["payload"] for s in signals["result"]] == [2]
        assert emitted["result"] == {"channel": "deploys.asked", "event_id": 1, "duplicate": False, "triggered": []}
        assert read_logs(home, "signal", "emit", "deploys.asked")[0]["payload"]["payload"] == {"n": 1}
        assert [(s["name"], s["tables"]) for s in senses["result"]] == [
            ("prs", ["_signals", "pr"]), ("nerve-health", ["_signals"]), ("nerve-threads", ["_signals"])]
        # the model was handed the failure as the tool's result, and the thread went on
        assert tool_results(_messages(home, looked)[1]["content"])[1] == "Error: flaky 3 broke"

        shown = thread_show(thread_detail(home / "data" / "logs.db", refused))
        # the question: the call, then what the model said with it
        assert shown["question"].splitlines()[0] == 'Allow the tool call deploy({"env":"prod"})?'
        asked = shown["waiting_for"]["questions"]
        assert shown["waiting_for"] == {"kind": "person", "question": shown["question"], "schema": None,
                                        "questions": asked}
        assert [(q["id"], q["call"]["name"], q["approvals"]) for q in asked] == [("q1", "deploy", [])]
        answer_thread(home, refused, "reject", "not on a Friday", via="nerve thread reject")
        wait_for(lambda: status(refused) == "completed", 30, what="the refused thread to end")
        assert tool_results(_messages(home, refused)[-1]["content"]) == ["Rejected by a person: not on a Friday"]

        (home / "deploy-hold").write_text("")
        answer_thread(home, killed, "approve", None, via="nerve thread approve")
        wait_for(lambda: (home / "deploy-started").exists(), 30, what="the approved deploy to start")
        engine.stop(signal.SIGKILL)  # while the approved call runs

    (home / "deploy-hold").unlink()
    (home / "deploy-gate").write_text("")
    assert answer_thread(home, allowed, "approve", "go", via="nerve thread approve")["via"] == "offline"
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: status(allowed) == "completed" and status(killed) == "completed", 30,
                 what="both approved threads to end")
        engine.stop()

    assert sorted(_deploys(home)) == ["canary", "staging"]  # each approved call ran once; the refused one never
    assert tool_results(_messages(home, allowed)[-1]["content"]) == ["deployed staging"]
    ran = _messages(home, allowed)[-1]["meta"]["tool_calls"]
    assert [(c["name"], c["approval"]["decision"], c["approval"]["via"]) for c in ran] == [
        ("deploy", "approve", "nerve thread approve")]
    assert [m["role"] for m in _messages(home, allowed)] == [START, "agent", "__person__", "__tool__", "agent"]
    # the worker died while the approved call ran: resumed (idempotent), the call is not run again
    after_kill = _messages(home, killed)
    assert [m["role"] for m in after_kill] == [START, "agent", "__person__", "__tool__", "__tool__", "agent"]
    assert tool_results(after_kill[-1]["content"])[0].startswith("Not run: this call was approved, but the worker")


SYNC_AGENT = AGENT.replace('agent = llm_role(model="echo",', 'agent = llm_role(model="echo", sync=True,')


def test_a_thread_cancelled_while_an_approved_call_runs_runs_nothing_after_it_and_ends_once_it_returned(
        home: Path, llm_home: Path) -> None:
    """A sync model's chain runs in a thread of its own, which cancelling the thread's task does not stop: it
    went on to the next approved call after the thread was recorded cancelled (an approve and a cancel at
    once: both accepted, the thread `cancelled`, and the approved tool ran)."""
    write_instance(home, """
        senses:
          prs: {}
        workflows:
          agent: {cancel_grace: 60s}
    """, {"prs": PRS}, {"prs": PRS_SCHEMA})
    assert generate_migration(home / "senses" / "prs") is not None
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "agent.py").write_text(SYNC_AGENT)
    status = lambda run: thread_statuses(home).get(run)  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready()
        run = request(home, "start_thread", workflow="agent",
                      prompt=_calls(("deploy", {"env": "prod"}), ("deploy", {"env": "staging"})))["run_id"]
        wait_for(lambda: status(run) == "waiting", 30, what="the thread to ask about its two deploys")
        (home / "deploy-hold").write_text("")
        answered = answer_thread(home, run, "approve", None, via="nerve thread approve")
        assert answered["resumes"], answered
        wait_for(lambda: (home / "deploy-started").exists(), 30, what="the first approved deploy to start")
        assert request(home, "cancel_thread", run_id=run, reason="stop")["status"] == "cancelling"
        # the deploy it started runs on: the thread is not said stopped meanwhile
        time.sleep(0.5)
        assert status(run) == "started"
        (home / "deploy-gate").write_text("")
        wait_for(lambda: status(run) == "cancelled", 30, what="the thread to end once its deploy returned")
        ended = read_logs(home, "workflow", "cancelled", run)[-1]["payload"]
        engine.stop()
    assert _deploys(home) == ["prod"]  # the second approved call never started: it was cancelled first
    assert ended["by"] and ended["was"] == "started"


# -- the role alone, without a worker --------------------------------------------------------------------


def _run(role, prompt: str, can_wait: bool = True) -> object:
    async def call():
        enter_thread(ThreadInfo("run-1", "w", home=None, can_wait=can_wait))
        return await role((WorkflowMessage(START, prompt, {"maxRounds": 3}, 1),))

    return asyncio.run(call())


def test_a_round_asking_for_too_many_tool_calls_fails_with_the_cap(llm_home: Path) -> None:
    def ping(n: int) -> int:
        """Answers n."""
        return n

    role = llm_role(model="echo", prompt=lambda m: m[0].content, tools=[ping], max_tool_calls=2)
    with pytest.raises(RoleSetupError, match=r"more than 2 tool calls in one round \(llm_role max_tool_calls=2\)"):
        _run(role, _calls(("ping", {"n": 1}), ("ping", {"n": 2}), ("ping", {"n": 3})))
    result = _run(role, _calls(("ping", {"n": 1}), ("ping", {"n": 2})))
    assert [c["result"] for c in result.meta["tool_calls"]] == [1, 2]
    with pytest.raises(ValueError, match="two tools share a name"):
        llm_role(tools=[ping, tool(ping)])
    with pytest.raises(TypeError, match="takes functions"):
        llm_role(tools=[lambda n: n])


def test_an_approval_in_a_round_that_cannot_wait_is_refused_and_the_model_is_told(llm_home: Path) -> None:
    calls = []

    def deploy(env: str) -> str:
        """Deploys."""
        calls.append(env)
        return "done"

    only_prod = tool(deploy, approval=lambda arguments: arguments["env"] == "prod")
    role = llm_role(model="echo", prompt=lambda m: m[0].content, tools=[only_prod])
    result = _run(role, _calls(("deploy", {"env": "prod"}), ("deploy", {"env": "dev"})), can_wait=False)
    assert calls == ["dev"]  # the call needing no approval ran
    assert [c["approval"]["decision"] for c in result.meta["tool_calls"] if "approval" in c] == ["refused"]
    assert tool_results(result.content)[0].startswith("Not run: this call needs a person's approval")
    asked = _run(role, _calls(("deploy", {"env": "prod"})))
    assert isinstance(asked, AskPerson)
    assert asked.content.splitlines()[0] == 'Allow the tool call deploy({"env":"prod"})?'
    assert calls == ["dev"] and asked.meta["tool_approval"]["calls"][0]["arguments"] == {"env": "prod"}


def test_tool_calls_count_against_the_roles_timeout(llm_home: Path) -> None:
    """A tool that takes too long is the role's time running out: the round ends at role_timeout."""
    import threading

    from nerve_cli.automaton.model import END, WorkflowDefinition
    from nerve_cli.automaton.thread import ThreadContext, run_thread

    release = threading.Event()

    def slow(n: int) -> int:
        """Answers n, when it is let go."""
        release.wait(30)
        return n

    role = llm_role(model="echo", prompt=lambda m: m[0].content, tools=[slow])
    definition = WorkflowDefinition(roles={"agent": role}, moderator=lambda m: "agent" if len(m) == 1 else END)

    async def persist(seq: int, message: WorkflowMessage) -> None:
        return None

    async def call():
        enter_thread(ThreadInfo("run-1", "w", home=None))
        chain = [WorkflowMessage(START, _calls(("slow", {"n": 1})), {"maxRounds": 2}, 1)]
        return await run_thread(definition, chain, persist, ThreadContext(role_timeout=0.5))

    try:
        outcome = asyncio.run(call())
    finally:
        release.set()
    assert outcome.status == "failed", outcome
    assert "role 'agent' timed out after 0.5s (role_timeout)" in outcome.reason, outcome.reason
