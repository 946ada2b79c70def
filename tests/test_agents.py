"""Agents' inboxes through the CLI, with no engine: `nerve agent wait|next|ack|list|install`, two agents, a
harness killed mid-turn, `agents:` in config check, and the documents against their schemas."""

from __future__ import annotations

import json
import time

import contractkit as contract
from agentkit import Sim, ended, install_claude, turns
from conftest import nerve
from enginekit import wait_for, write_instance

from nerve_cli.ops.emit import emit_event

CONFIG = """
senses:
  disk-usage: {}
agents:
  coder: {on: [ci.done], batch: 5}
  reviewer: {on: [ci.done, review.posted], match: {ok: false}, batch: 5, start: all}
"""
CHECK = contract.Checked()


def _doc(kind: str, done) -> dict:
    return CHECK.doc(kind, json.loads(done.stdout), kind)


def test_next_ack_and_the_offline_inbox(home):
    write_instance(home, CONFIG, {})
    assert _doc("agent-delivery", nerve("agent", "next", "coder", "--json", home=home))["delivery"] is None
    for n in range(7):  # no engine: `nerve emit` stores them itself
        emit_event(home, "ci.done", {"n": n, "ok": n % 2 == 0})
    listed = {a["name"]: a for a in _doc("agent-list", nerve("agent", "list", "--json", home=home))["agents"]}
    assert listed["coder"]["backlog"] == 7 and listed["coder"]["oldest_ms"] is not None
    first = _doc("agent-delivery", nerve("agent", "next", "coder", "--json", home=home))
    assert [e["payload"]["n"] for e in first["events"]] == [0, 1, 2, 3, 4] and first["more"]
    again = _doc("agent-delivery", nerve("agent", "next", "coder", "--json", home=home))
    assert (again["delivery"], again["handed"], again["redelivered"]) == (first["delivery"], 2, True)
    acked = _doc("agent-ack", nerve("agent", "ack", "coder", str(first["delivery"]), "--json", home=home))
    assert acked["acked"] == [first["delivery"]]
    repeat = nerve("agent", "ack", "coder", str(first["delivery"]), "999", "--json", home=home)
    assert repeat.returncode == 1 and _doc("agent-ack", repeat)["unknown"] == [999]
    rest = _doc("agent-delivery", nerve("agent", "next", "coder", "--json", home=home))
    assert [e["payload"]["n"] for e in rest["events"]] == [5, 6] and not rest["more"]
    # the reviewer hears only failures (`match`), from the start of its sources (`start: all`)
    review = _doc("agent-delivery", nerve("agent", "next", "reviewer", "--json", home=home))
    assert [e["payload"]["n"] for e in review["events"]] == [1, 3, 5]
    (home / "nerve.yaml").write_text(CONFIG.replace("batch: 5}", "batch: 5, enabled: false}", 1))
    off = nerve("agent", "next", "coder", home=home)
    assert off.returncode == 1 and "agent coder is disabled" in off.stderr
    unknown = nerve("agent", "next", "codr", home=home)
    assert unknown.returncode == 2 and "no agent 'codr'" in unknown.stderr and "coder" in unknown.stderr


def test_a_channel_store_put_back_from_a_backup_gives_the_agent_what_came_after_its_cursor(home, tmp_path):
    """events.db put back from `nerve backup` has the same identity and ids behind the agent's cursor: the
    agent hears what is stored after, not nothing until the ids pass its cursor again."""
    write_instance(home, CONFIG, {})

    def heard() -> list[int]:
        done = _doc("agent-delivery", nerve("agent", "next", "coder", "--json", home=home))
        if done["delivery"] is not None:
            nerve("agent", "ack", "coder", str(done["delivery"]), home=home)
        return [e["payload"]["n"] for e in done["events"]]

    assert heard() == []  # its first look: start: new
    for n in range(2):
        emit_event(home, "ci.done", {"n": n})
    assert heard() == [0, 1]
    assert nerve("backup", str(tmp_path / "copy"), home=home).returncode == 0
    for n in range(2, 6):
        emit_event(home, "ci.done", {"n": n})
    assert heard() == [2, 3, 4, 5]  # the cursor at id 6
    time.sleep(0.01)  # what is stored from now on comes after the agent's cursor was written
    for suffix in ("-wal", "-shm"):
        (home / "data" / f"events.db{suffix}").unlink(missing_ok=True)
    (home / "data" / "events.db").write_bytes((tmp_path / "copy" / "data" / "events.db").read_bytes())
    for n in (10, 11):
        emit_event(home, "ci.done", {"n": n})  # ids 3 and 4 again, in the restored lineage: behind 6
    assert heard() == [10, 11]


def test_wait_exits_2_with_the_events_on_stderr_and_0_on_timeout(home):
    write_instance(home, CONFIG, {})
    nerve("agent", "next", "coder", home=home)  # its first look
    quiet = nerve("agent", "wait", "coder", "--timeout", "200ms", "--json", home=home)
    assert quiet.returncode == 0 and quiet.stderr == "" and _doc("agent-delivery", quiet)["timed_out"] is True
    emit_event(home, "ci.done", {"job": 7, "ok": False})
    woke = nerve("agent", "wait", "coder", "--timeout", "10s", "--json", home=home)
    assert woke.returncode == 2, woke.stderr
    assert "ci.done #1" in woke.stderr and '"job":7' in woke.stderr and "delivery 1" in woke.stderr
    assert _doc("agent-delivery", woke)["events"][0]["payload"] == {"job": 7, "ok": False}
    # called again, it acknowledges that delivery: nothing comes back
    after = nerve("agent", "wait", "coder", "--timeout", "200ms", "--json", home=home)
    assert after.returncode == 0 and _doc("agent-delivery", after)["acked"] == [1]


def test_two_agents_each_get_every_event_once(home, tmp_path):
    write_instance(home, """
agents:
  coder: {on: [ci.done], batch: 3}
  reviewer: {on: [ci.done], batch: 4}
""", {})
    logs = {}
    sims = []
    for agent in ("coder", "reviewer"):
        project = tmp_path / agent
        install_claude(home, agent, project)
        logs[agent] = tmp_path / f"{agent}.jsonl"
        sims.append(Sim(project, logs[agent], f"{agent}-1"))
    try:
        for n in range(12):
            emit_event(home, "ci.done", {"n": n})
        for agent, log in logs.items():
            wait_for(lambda: sum(len(t["events"]) for t in ended(log)) >= 12, 60, what=f"{agent}'s events")
    finally:
        for sim in sims:
            sim.kill()
    for log in logs.values():
        heard = sorted(int(e.split("#")[1]) for t in ended(log) for e in t["events"])
        assert heard == list(range(1, 13))


def test_a_harness_killed_mid_turn_gets_that_turns_events_again_with_the_same_delivery_id(home, tmp_path):
    write_instance(home, "agents:\n  coder: {on: [ci.done]}\n", {})
    project, log = tmp_path / "project", tmp_path / "turns.jsonl"
    install_claude(home, "coder", project)
    sim = Sim(project, log, "s1", "--hang-at", "1")  # its first turn never ends
    emit_event(home, "ci.done", {"n": 1})
    emit_event(home, "ci.done", {"n": 2})
    wait_for(lambda: turns(log), 30, what="the first turn to start")
    sim.kill()
    cut = turns(log)[0]
    time.sleep(0.2)
    sim = Sim(project, log, "s1", "--source", "resume")  # the same session, resumed
    try:
        wait_for(lambda: ended(log), 30, what="the turn again")
    finally:
        sim.kill()
    again = ended(log)[0]
    assert (again["delivery"], again["events"], again["redelivered"]) == (cut["delivery"], cut["events"], True)
    assert cut["events"] == ["ci.done#1", "ci.done#2"] and cut["redelivered"] is False


def test_install_claude_keeps_every_entry_and_is_idempotent(home, tmp_path):
    write_instance(home, "agents:\n  coder: {on: [ci.done]}\n", {})
    project = tmp_path / "app"
    (project / ".claude").mkdir(parents=True)
    settings = {
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "permissions": {"allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"], "deny": ["Read(./.env)"]},
        "env": {"FOO": "1"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
        "model": "opus",
    }
    (project / ".claude" / "settings.json").write_text(json.dumps(settings, indent=4))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"github": {"command": "gh-mcp"}}}))
    dry = CHECK.doc("agent-install", install_dry := json.loads(
        nerve("agent", "install", "claude", "coder", "--project", str(project), "--dry-run", "--json",
              home=home).stdout), "install --dry-run")
    assert dry["dry_run"] and json.loads((project / ".claude" / "settings.json").read_text()) == settings
    assert install_dry["files"][0]["action"] == "updated"
    first = CHECK.doc("agent-install", install_claude(home, "coder", project), "install")
    written = json.loads((project / ".claude" / "settings.json").read_text())
    for key in ("$schema", "permissions", "env", "model"):
        assert written[key] == settings[key]
    assert written["hooks"]["PreToolUse"] == settings["hooks"]["PreToolUse"]
    assert written["hooks"]["Stop"][0] == settings["hooks"]["Stop"][0]
    ours = [h for event in ("SessionStart", "Stop") for g in written["hooks"][event] for h in g["hooks"]
            if "agent wait coder" in h["command"]]
    assert len(ours) == 2 and all(h["async"] and h["asyncRewake"] for h in ours)
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["github"] == {"command": "gh-mcp"} and servers["nerve"]["args"][:1] == ["mcp"]
    before = {p.name: p.read_text() for p in (project / ".claude" / "settings.json", project / ".mcp.json")}
    second = install_claude(home, "coder", project)
    assert [f["action"] for f in second["files"]] == ["unchanged", "unchanged"]
    assert {p.name: p.read_text() for p in (project / ".claude" / "settings.json", project / ".mcp.json")} == before
    assert [f["action"] for f in first["files"]] == ["updated", "updated"]
    (project / ".mcp.json").write_text("{not json")
    broken = nerve("agent", "install", "claude", "coder", "--project", str(project), home=home)
    assert broken.returncode != 0 and ".mcp.json is not valid JSON" in broken.stderr
    assert (project / ".mcp.json").read_text() == "{not json"


def test_install_opencode_and_codex(home, tmp_path, monkeypatch):
    write_instance(home, "agents:\n  coder: {on: [ci.done]}\n", {})
    project = tmp_path / "app"
    project.mkdir()
    (project / "opencode.json").write_text(json.dumps({"$schema": "https://opencode.ai/config.json", "theme": "x"}))
    done = nerve("agent", "install", "opencode", "coder", "--project", str(project), "--json", home=home)
    assert done.returncode == 0, done.stderr
    config = json.loads((project / "opencode.json").read_text())
    assert config["theme"] == "x" and config["mcp"]["nerve"]["type"] == "local"
    hooks = json.loads((project / ".opencode" / "hooks.json").read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["asyncRewake"] is True
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('model = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n')
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    for _ in range(2):
        done = nerve("agent", "install", "codex", "coder", "--json", home=home)
        assert done.returncode == 0, done.stderr
    import tomllib

    toml = tomllib.loads((codex_home / "config.toml").read_text())
    assert toml["model"] == "o3" and toml["mcp_servers"]["other"] == {"command": "x"}
    assert toml["mcp_servers"]["nerve"]["args"][0] == "mcp"
    assert "deliver.codex" in json.loads(done.stdout)["notes"][0]


def test_config_check_reads_agents_like_reflexes(home):
    write_instance(home, """
senses:
  disk-usage: {}
reflexes:
  - {sense: disk-usage, on: [ci.done]}
agents:
  coder: {on: [ci.done, disk-usag, ci.don, build-box/disk-usage], match: {ok: false}}
  bad: {on: [], batch: 0, deliver: {codex: {endpoint: "http://x", thread: t}}}
""", {})
    done = nerve("config", "check", "--fast", "--json", home=home)
    problems = {p["path"]: p for p in json.loads(done.stdout)["problems"]}
    assert done.returncode == 1
    assert "did you mean sense `disk-usage`" in problems["agents.coder.on[1]"]["message"]
    assert "did you mean channel `ci.done`" in problems["agents.coder.on[2]"]["message"]
    assert "fleet.subscribe.senses" in problems["agents.coder.on[3]"]["message"]
    assert "agents.coder.on[0]" not in problems
    assert problems["agents.bad.on"]["severity"] == "error" and problems["agents.bad.batch"]["severity"] == "error"
    assert "unix://PATH" in problems["agents.bad.deliver.codex.endpoint"]["message"]


def test_mesh_draws_each_agent_from_its_sources(home):
    write_instance(home, CONFIG, {})
    mesh = json.loads(nerve("mesh", "--json", home=home).stdout)
    CHECK.doc("mesh", mesh, "mesh --json")
    edges = {(e["source"], e["target"], e["label"]) for e in mesh["edges"]}
    assert ("channel:ci.done", "agent:coder", "on") in edges
    assert ("channel:review.posted", "agent:reviewer", "on (match ok=False)") in edges
    tree = nerve("mesh", home=home).stdout
    assert "coder (agent)" in tree and "reviewer (agent)" in tree
    assert nerve("mesh", "--format", "dot", home=home).returncode == 0


def test_the_agent_hooks_recipe_folds_a_sessions_hook_events(home):
    from conftest import cli

    assert cli("init", "--home", str(home)).exit_code == 0
    made = nerve("sense", "new", "hooks-log", "--from", "agent-hooks", "--on", "hooks", home=home)
    assert made.returncode == 0, made.stderr
    hooks = [
        {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "npm test"},
         "tool_response": {"exit_code": 1}},
        {"headers": {"X-Hook": "1"}, "body": {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Edit",
                                             "tool_input": {"file_path": "/p/a.py"}, "tool_response": {}}},
        {"session_id": "s1", "hook_event_name": "PostToolUseFailure", "tool_name": "Read", "tool_input": {},
         "error": "no such file"},
        {"session_id": "s2", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
         "tool_response": {"exit_code": 0}},
    ]
    args = [a for hook in hooks for a in ("--event", "hooks=" + json.dumps(hook))]
    tried = json.loads(nerve("sense", "compute", "hooks-log", "--dry-run", "--json", *args, home=home).stdout)
    assert tried["error"] is None, tried["error"]
    sessions = {s["session_id"]: s for s in tried["payload"]["sessions"]}
    assert (sessions["s1"]["failed_commands"], sessions["s1"]["files_edited"], sessions["s1"]["tool_errors"]) == (1, 1, 1)
    assert (sessions["s2"]["failed_commands"], sessions["s2"]["events"]) == (0, 1)
    notes = {(r["row"]["kind"], r["row"]["detail"]) for t in tried["tables"] if t["name"] == "hook_note" for r in t["rows"]}
    assert notes == {("failed_command", "npm test"), ("file_edited", "/p/a.py"), ("tool_error", "Read: no such file")}
