"""Coding agents woken exactly once: a harness loop running `nerve agent wait` as its asyncRewake hook.

The harness is the simulator of Claude Code's hook protocol (harnesssim.py:
settings file, stdin JSON, exit 2 wakes, Stop after each turn); the hook is
the real `nerve agent wait`, installed by the real `nerve agent install
claude`; the engine is the real `nerve run`, killed -9 once. Each exit 2 the
harness turns into a turn is one line of its log.
"""

from __future__ import annotations

import json
import signal

import pytest
from agentkit import Sim, ended, install_claude, turns
from enginekit import RunningEngine, wait_for, write_instance

from nerve_cli.ops.emit import emit_event

CONFIG = """
agents:
  coder: {on: [ci.done], batch: 1}
"""


def _emit(home, first: int, last: int) -> None:
    for n in range(first, last + 1):
        emit_event(home, "ci.done", {"n": n})


def _completed(log) -> dict[int, dict]:
    """Delivery id → its first completed turn: how a harness dedupes (the id is the same when handed again)."""
    out: dict[int, dict] = {}
    for turn in ended(log):
        out.setdefault(turn["delivery"], turn)
    return out


def _heard(log) -> list[int]:
    return sorted(int(e.split("#")[1]) for t in _completed(log).values() for e in t["events"])


@pytest.mark.timeout(400)
def test_a_hundred_events_across_harness_restarts_and_a_kernel_kill_are_a_hundred_turns(home, tmp_path):
    write_instance(home, CONFIG, {})
    project, log = tmp_path / "project", tmp_path / "turns.jsonl"
    install_claude(home, "coder", project)  # the agent's first look: what comes from now on is its news
    engine = RunningEngine(home)
    try:
        engine.wait_ready(groups=0)
        sim = Sim(project, log, "s1")
        _emit(home, 1, 25)  # through the engine
        wait_for(lambda: len(_completed(log)) >= 10, 60, what="ten turns")
        sim.kill()  # restart 1: mid-wait or mid-turn, whatever the moment is
        sim = Sim(project, log, "s2")
        wait_for(lambda: len(_completed(log)) >= 20, 60, what="twenty turns")
        engine.stop(signal.SIGKILL)  # the kernel dies; the agent's inbox is the files, not the engine
        _emit(home, 26, 45)  # stored by `nerve emit` itself, no engine running
        wait_for(lambda: len(_completed(log)) >= 30, 60, what="thirty turns")
        sim.kill()  # restart 2: now no harness and no engine run
        _emit(home, 46, 60)
        sim = Sim(project, log, "s3")  # the next session hears what came meanwhile
        engine = RunningEngine(home)
        engine.wait_ready(groups=0)
        _emit(home, 61, 100)
        wait_for(lambda: len(_completed(log)) >= 70, 120, what="seventy turns")
        sim.kill()  # restart 3
        sim = Sim(project, log, "s4")
        wait_for(lambda: len(_completed(log)) >= 100, 120, what="a hundred turns")
        sim.kill()
    finally:
        engine.stop()
    done = _completed(log)
    assert _heard(log) == list(range(1, 101)), "each event in exactly one delivery: 0 lost, 0 twice"
    assert len(done) == 100, "a hundred turns (batch: 1)"
    # a delivery handed again (its turn cut short, its Stop hook killed with the harness before it could
    # acknowledge, or handed to a harness that died before it read it) came with the same id and the same
    # events, marked as handed before
    for turn in turns(log):
        assert turn["events"] == done[turn["delivery"]]["events"]
    seen: set[int] = set()
    for turn in [t for t in turns(log) if t["t"] == "start"]:
        assert turn["redelivered"] or turn["delivery"] not in seen, turn
        seen.add(turn["delivery"])


WORKED = """
engine:
  webhooks: {port}
channels:
  ci.done: {{webhook: true}}
  hooks: {{webhook: true, key: body.tool_use_id}}
  gh: {{webhook: true, keep_headers: [X-GitHub-Event]}}
senses:
  pushes: {{}}
reflexes:
  - {{sense: pushes, on: [gh], bindings: {{headers.X-GitHub-Event: push}}}}
agents:
  coder: {{on: [ci.done], match: {{conclusion: failure}}}}
  reviewer: {{on: [gh], match: {{headers.X-GitHub-Event: pull_request}}}}
"""
PUSHES = """
def compute(db, peers, trigger):
    return [e.payload["headers"]["X-GitHub-Event"] for e in trigger.events] or None
"""


def _post(port: int, channel: str, body: dict, **headers: str) -> tuple[int, dict]:
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/emit/{channel}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_wake_your_coding_agent_when_ci_fails_and_hear_what_it_does(home, tmp_path):
    """The worked example of docs/guides/agents.md, with a hook's body key and a kept header besides."""
    from conftest import nerve
    from enginekit import free_port, last_signal

    port = free_port()
    write_instance(home, WORKED.format(port=port), {"pushes": PUSHES})
    project, log = tmp_path / "app", tmp_path / "turns.jsonl"
    install_claude(home, "coder", project)
    nerve("agent", "next", "reviewer", home=home)  # its first look
    engine = RunningEngine(home)
    sim = None
    try:
        engine.wait_ready()
        sim = Sim(project, log, "s1")
        assert _post(port, "ci.done", {"job": "lint", "conclusion": "success"})[0] == 202
        assert _post(port, "ci.done", {"job": "test", "conclusion": "failure", "url": "https://ci.example/41"})[0] == 202
        wait_for(lambda: ended(log), 60, what="the agent's turn")
        # a Claude Code HTTP hook posted twice (its retry) is one event: the body's tool_use_id is the key
        hook = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_use_id": "toolu_01", "tool_name": "Bash"}
        first, second = _post(port, "hooks", hook), _post(port, "hooks", hook)
        assert (first[0], second[0], second[1]["duplicate"], second[1]["event_id"]) == (
            202, 200, True, first[1]["event_id"])
        # one URL for every GitHub event type: the kept header routes them
        assert _post(port, "gh", {"ref": "main"}, **{"X-GitHub-Event": "push"})[0] == 202
        assert _post(port, "gh", {"number": 7}, **{"X-GitHub-Event": "pull_request"})[0] == 202
        wait_for(lambda: last_signal(home, "pushes"), 30, what="the push's compute")
    finally:
        if sim is not None:
            sim.kill()
        engine.stop()
    [turn] = ended(log)
    assert turn["events"] == ["ci.done#2"]  # the failure, not the success
    assert last_signal(home, "pushes") == ["push"]
    review = json.loads(nerve("agent", "next", "reviewer", "--json", home=home).stdout)
    assert [e["payload"] for e in review["events"]] == [{"headers": {"X-GitHub-Event": "pull_request"},
                                                         "body": {"number": 7}}]


def test_the_metrics_show_each_agents_backlog(home):
    from conftest import nerve
    from enginekit import free_port, metric_samples

    port = free_port()
    write_instance(home, "agents:\n  coder: {on: [ci.done], batch: 2}\n  idle: {on: [other]}\n", {})
    nerve("agent", "next", "coder", home=home)  # its first look
    for n in range(3):
        emit_event(home, "ci.done", {"n": n})
    nerve("agent", "next", "coder", home=home)  # two of them handed, pending
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready(groups=0)

        def agents() -> dict:
            samples = metric_samples(port)
            return {(name, labels["agent"]): value for name, labels, value in samples if name.startswith("nerve_agent_")}

        found = wait_for(lambda: (a := agents()) and a.get(("nerve_agent_backlog_events", "coder")) == 3 and a,
                         30, what="the agents' gauges")
        engine.stop()
    assert found[("nerve_agent_pending_deliveries", "coder")] == 1
    assert found[("nerve_agent_backlog_oldest_age_seconds", "coder")] > 0
    assert found[("nerve_agent_backlog_events", "idle")] == 0


def test_the_engine_takes_each_agents_first_look_at_start(home):
    """`start: new` counts from the agent's first look: a running engine takes it, so what reaches the engine
    before any harness asked is the agent's (without it, the first take would start after these events)."""
    from conftest import nerve

    write_instance(home, "agents:\n  coder: {on: [ci.done]}\n", {})
    emit_event(home, "ci.done", {"n": 0})  # before anyone looked: history, not news
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: json.loads(nerve("agent", "list", "--json", home=home).stdout)["agents"][0]["unheard"] == 0
                 and (home / "data" / "agents.db").exists(), 30, what="the engine's first look")
        emit_event(home, "ci.done", {"n": 1})
        engine.stop()
    taken = json.loads(nerve("agent", "next", "coder", "--json", home=home).stdout)
    assert [e["payload"]["n"] for e in taken["events"]] == [1]


def test_status_and_top_show_each_agents_backlog_running_and_stopped(home):
    import asyncio

    from conftest import nerve
    from test_top import dashboard, table_rows, until

    from nerve_cli.top.app import NerveTop

    write_instance(home, "agents:\n  coder: {on: [ci.done], batch: 2}\n  idle: {on: [other]}\n", {})
    nerve("agent", "next", "coder", home=home)  # its first look
    for n in range(3):
        emit_event(home, "ci.done", {"n": n})
    nerve("agent", "next", "coder", home=home)  # two of them handed, pending

    def agents() -> dict:
        done = nerve("status", "--json", home=home)
        return {a["name"]: a for a in json.loads(done.stdout)["agents"]}

    stopped = agents()  # no engine: read from the files
    assert stopped["coder"]["backlog"] == 3 and stopped["coder"]["deliveries"] == 1
    assert stopped["coder"]["pending"] == 2 and stopped["coder"]["age_s"] > 0 and stopped["idle"]["backlog"] == 0
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        running = wait_for(lambda: (a := agents()) and a["coder"]["backlog"] == 3 and a, 30, what="the agents' rows")
        assert running["coder"]["deliveries"] == 1 and running["coder"]["oldest_ms"] == stopped["coder"]["oldest_ms"]
        table = nerve("status", home=home).stdout
        assert "Agents" in table and "coder" in table and "idle" in table, table

        async def top() -> None:
            app = NerveTop(home)
            async with app.run_test(size=(100, 30)) as pilot:
                shown = await dashboard(pilot, app)
                rows = await until(pilot, lambda: {r[0]: r for r in table_rows(shown.query_one("#senses"))
                                                   if r[0].startswith("agent ")}, 10, "the agents' rows")
                assert rows["agent coder"][2] == "1 pending" and rows["agent coder"][6].startswith("3 · ")
                assert rows["agent idle"][6] == "0"

        asyncio.run(top())
        engine.stop()


def test_an_agent_a_reload_adds_has_its_first_look_taken_by_the_engine(home):
    """The engine looks at its agents when a reload changes the config (no timer): the added agent's first look
    is taken then, so an event after the reload is the agent's."""
    from conftest import nerve
    from enginekit import read_logs

    write_instance(home, "senses: {}\n", {})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        (home / "nerve.yaml").write_text("agents:\n  coder: {on: [ci.done]}\n")
        wait_for(lambda: read_logs(home, "system", "config_reloaded"), 30, what="the reload")
        wait_for(lambda: (home / "data" / "agents.db").exists()
                 and json.loads(nerve("agent", "list", "--json", home=home).stdout)["agents"][0]["unheard"] == 0,
                 30, what="the engine's first look for the added agent")
        emit_event(home, "ci.done", {"n": 1})
        engine.stop()
    taken = json.loads(nerve("agent", "next", "coder", "--json", home=home).stdout)
    assert [e["payload"]["n"] for e in taken["events"]] == [1]
