"""A sense launches a workflow thread through the running engine (its `workflow` directive)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from enginekit import RunningEngine, errors, nerve, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.ops.client import request

CLEANUP = textwrap.dedent('''
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def planner(messages):
        return RoleResult(f"plan for: {messages[0].content}", {"steps": 2})

    async def doer(messages):
        return RoleResult("done", {"freed_gb": 12})

    def moderator(messages):
        last = messages[-1].role
        return {"__start__": "planner", "planner": "doer"}.get(last, END)

    workflow = WorkflowDefinition(roles={"planner": planner, "doer": doer}, moderator=moderator)
''')

WATCHER = textwrap.dedent('''
    from nerve_cli.sdk import SenseResult

    def compute(db, peers):
        return SenseResult({"disk": 95}, workflow=DIRECTIVE)
''')


def _signals(home: Path, sense: str) -> list:
    conn = sqlite3.connect(home / "data" / "senses" / f"{sense}.db")
    try:
        return [json.loads(r[0]) for r in conn.execute("SELECT payload FROM _signals")]
    finally:
        conn.close()


def _instance(home: Path, directives: dict[str, str], extra: str = "") -> None:
    senses = {name: WATCHER.replace("DIRECTIVE", repr(d)) for name, d in directives.items()}
    config = "senses:\n" + "".join(f"  {n}: {{}}\n" for n in senses) + "reflexes:\n" + "".join(
        f"  - {{sense: {n}, on: [go-{n}]}}\n" for n in senses) + (
        "workflows:\n  cleanup: {concurrency: 1, overflow: queue}\n  parked: {enabled: false}\n" + extra)
    write_instance(home, config, senses)
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "cleanup.py").write_text(CLEANUP)
    (home / "workflows" / "parked.py").write_text(CLEANUP)


def test_a_sense_launches_a_thread_end_to_end(home: Path) -> None:
    _instance(home, {"watcher": "cleanup|5|disk is 95% full | act now"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="go-watcher")
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20, what="the thread to complete")
        engine.stop()
    assert _signals(home, "watcher") == [{"disk": 95}]  # the signal went out as well
    shown = json.loads(nerve("thread", "show", "run-1", "--json", home=home).stdout)
    text = json.dumps(shown)
    assert "disk is 95% full | act now" in text  # the prompt keeps its '|'
    rounds = [m for m in read_logs(home, "workflow", "message", "run-1")]
    assert [m["payload"]["role"] for m in rounds] == ["__start__", "planner", "doer"]
    assert rounds[0]["payload"]["meta"] == {"maxRounds": 5}
    table = nerve("thread", "show", "run-1", home=home)
    assert table.returncode == 0 and "planner" in table.stdout and "doer" in table.stdout


def test_bad_unknown_and_disabled_directives_are_refused_and_the_signal_still_goes_out(home: Path) -> None:
    _instance(home, {"bad": "cleanup|many|x", "unknown": "nosuch|3|x", "off": "parked|3|x"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for name in ("bad", "unknown", "off"):
            request(home, "emit", channel=f"go-{name}")
        wait_for(lambda: all(errors(home, n) for n in ("bad", "unknown", "off")), 15, what="three refusals")
        engine.stop()
    assert "maxRounds" in errors(home, "bad")[0]["payload"]["message"]
    assert "nosuch" in errors(home, "unknown")[0]["payload"]["message"]
    assert "disabled" in errors(home, "off")[0]["payload"]["message"]
    for name in ("bad", "unknown", "off"):
        assert _signals(home, name) == [{"disk": 95}]
    assert thread_statuses(home) == {}


def test_engine_max_rounds_caps_the_directive(home: Path) -> None:
    _instance(home, {"watcher": "cleanup|500|x"})
    text = (home / "nerve.yaml").read_text()
    (home / "nerve.yaml").write_text("engine: {max_rounds: 7}\n" + text)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="go-watcher")
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20)
        engine.stop()
    start = read_logs(home, "workflow", "message", "run-1")[0]["payload"]
    assert start["meta"] == {"maxRounds": 7}


HANGS = textwrap.dedent('''
    import asyncio
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def call_llm(messages):
        if "hang" in messages[0].content:
            await asyncio.sleep(3600)  # an LLM call that never answers
        return RoleResult("answer", {})

    def moderator(messages):
        return "call_llm" if len(messages) == 1 else END

    workflow = WorkflowDefinition(roles={"call_llm": call_llm}, moderator=moderator)
''')


def test_a_hung_role_frees_its_slot_at_role_timeout(home: Path) -> None:
    write_instance(home, "workflows:\n  ask: {concurrency: 1, overflow: queue, role_timeout: 300ms}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "ask.py").write_text(HANGS)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        first = request(home, "start_thread", workflow="ask", prompt="hang please", max_rounds=3)
        second = request(home, "start_thread", workflow="ask", prompt="quick one", max_rounds=3)
        assert (first["status"], second["status"]) == ("started", "queued")
        wait_for(lambda: thread_statuses(home).get(second["run_id"]) == "completed", 15, what="the queued thread to run")
        engine.stop()
    assert thread_statuses(home)[first["run_id"]] == "failed"
    ended = read_logs(home, "workflow", "failed", first["run_id"])[0]["payload"]
    assert "timed out after 0.3s" in ended["reason"]


VERSIONED = textwrap.dedent('''
    import asyncio
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def work(messages):
        await asyncio.sleep(float(messages[0].content))
        return RoleResult("VERSION", {})

    def moderator(messages):
        return "work" if len(messages) < 3 else END

    workflow = WorkflowDefinition(roles={"work": work}, moderator=moderator)
''')


def test_changing_a_workflow_file_drains_the_running_thread_then_uses_the_new_code(home: Path) -> None:
    write_instance(home, "workflows:\n  job: {concurrency: 2, drain_timeout: 10s}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "job.py").write_text(VERSIONED.replace("VERSION", "v1"))
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        running = request(home, "start_thread", workflow="job", prompt="0.6", max_rounds=5)["run_id"]
        wait_for(lambda: len(read_logs(home, "workflow", "message", running)) >= 2, 10, what="round 1 on the old code")
        (home / "workflows" / "job.py").write_text(VERSIONED.replace("VERSION", "v2"))  # round 2 is running
        wait_for(lambda: read_logs(home, "system", "workflow_reloaded", "job"), 10, what="the reload")
        wait_for(lambda: thread_statuses(home).get(running) == "completed", 15, what="the running thread to drain")
        after = request(home, "start_thread", workflow="job", prompt="0", max_rounds=5)["run_id"]
        wait_for(lambda: thread_statuses(home).get(after) == "completed", 15, what="a thread on the new code")
        engine.stop()
    old = [m["payload"]["content"] for m in read_logs(home, "workflow", "message", running)][1:]
    new = [m["payload"]["content"] for m in read_logs(home, "workflow", "message", after)][1:]
    assert old == ["v1", "v1"] and new == ["v2", "v2"]


def test_sense_compute_json_says_what_the_directive_did(home: Path) -> None:
    """`workflow` is the directive the compute returned and `thread` what it did: started (its run id),
    refused (why, also in the log), or not started (no engine)."""
    _instance(home, {"watcher": "cleanup|5|disk is full", "unknown": "nosuch|3|x"})
    offline = json.loads(nerve("sense", "compute", "watcher", "--json", home=home).stdout)
    assert offline["workflow"] == "cleanup|5|disk is full" and offline["thread"]["status"] == "not_started"
    with RunningEngine(home) as engine:
        engine.wait_ready()
        started = json.loads(nerve("sense", "compute", "watcher", "--json", home=home).stdout)
        refused = json.loads(nerve("sense", "compute", "unknown", "--json", home=home).stdout)
        shown = nerve("sense", "compute", "unknown", home=home)
        engine.stop()
    assert (started["via"], started["workflow"]) == ("engine", "cleanup|5|disk is full")
    assert started["thread"] == {"run_id": "run-1", "status": "started", "reason": None}
    assert refused["workflow"] == "nosuch|3|x" and refused["thread"]["status"] == "refused"
    assert refused["thread"]["run_id"] is None and "nosuch" in refused["thread"]["reason"]
    assert "refused" in shown.stderr and "nosuch" in shown.stderr, shown.stderr


FLAKY = textwrap.dedent('''
    from pathlib import Path
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    COUNT = Path(__file__).with_name("attempts.txt")

    async def writer(messages):
        tries = int(COUNT.read_text()) + 1 if COUNT.exists() else 1
        COUNT.write_text(str(tries))
        if tries < 3:
            raise ValueError(f"upstream said no ({tries})")
        return RoleResult("written at last", {})

    workflow = WorkflowDefinition(roles={"writer": writer}, moderator=lambda m: END if len(m) > 1 else "writer")
''')


def test_a_role_that_failed_twice_then_succeeded_leaves_its_two_failures_in_the_log_and_thread_show(
        home: Path) -> None:
    write_instance(home, "senses: {}\nworkflows:\n  flaky: {role_retries: 2, role_backoff: 50ms}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "flaky.py").write_text(FLAKY)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="flaky", prompt="go")["run_id"]
        wait_for(lambda: thread_statuses(home).get(run_id) == "completed", 30, what="the thread to complete")
        engine.stop()
    failed = read_logs(home, "workflow", "role_failed", run_id)
    assert [(r["payload"]["role"], r["payload"]["attempt"], r["payload"]["attempts"]) for r in failed] == [
        ("writer", 1, 3), ("writer", 2, 3)]
    assert "upstream said no (2)" in failed[1]["payload"]["reason"] and failed[1]["payload"]["error"]["line"]
    shown = json.loads(nerve("thread", "show", run_id, "--json", home=home).stdout)
    assert shown["status"] == "completed"  # a retried failure is part of the story, not a status
    assert [e["type"] for e in shown["events"]].count("role_failed") == 2
    table = nerve("thread", "show", run_id, home=home)
    assert "writer: attempt 1/3 failed" in table.stdout and "upstream said no (1)" in table.stdout, table.stdout
