"""The real Claude Code (from npm, `make tools`) woken by `nerve agent wait`, its model a fake on loopback.

`nerve agent install claude` writes the hooks; `claude -p` (offline:
ANTHROPIC_BASE_URL is tests/fakemodel.py's Messages API) starts a session, its
SessionStart hook — the real `nerve agent wait`, async with asyncRewake — takes
the waiting event and exits 2, and Claude Code wakes the session with it: the
model is called a second time with the delivery's text. The Stop hook after
that turn acknowledges it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from agentkit import install_claude
from conftest import nerve
from enginekit import wait_for, write_instance
from fakemodel import FakeAnthropic

from nerve_cli.ops.emit import emit_event

CLAUDE = Path(__file__).resolve().parents[1] / ".harnesses" / "node_modules" / ".bin" / "claude"


def _texts(request: dict) -> str:
    """Every text of the request's last user message."""
    last = request.get("messages", [{}])[-1]
    content = last.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


@pytest.mark.timeout(120)
def test_claude_code_is_woken_by_the_hook_and_its_turn_acknowledged(home, tmp_path):
    assert CLAUDE.exists(), f"{CLAUDE} is missing: `make tools` installs the harnesses from npm"
    write_instance(home, "agents:\n  coder: {on: [ci.done]}\n", {})
    project = tmp_path / "app"
    install_claude(home, "coder", project)
    emit_event(home, "ci.done", {"job": "test", "conclusion": "failure"})  # waiting before the session starts
    model = FakeAnthropic()
    env = {**os.environ, "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-test",
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "HOME": str(tmp_path / "home"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
    env.pop("NERVE_HOME", None)
    (tmp_path / "home").mkdir()
    claude = subprocess.Popen([str(CLAUDE), "-p", "say hi", "--model", "claude-sonnet-4-6"], cwd=project, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # the woken turn ended and its Stop hook's `nerve agent wait` acknowledged it (then -p mode waits for that
        # hook, still waiting for the next events, before it tears down: not this test's business)
        wait_for(lambda: _agent(home)["deliveries_acked"] == 1, 60, what="the woken turn's acknowledgement")
    finally:
        try:
            os.killpg(claude.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        claude.wait()
        model.close()
    woken = [r for r in model.requests if "ci.done #1" in _texts(r)]
    assert len(model.requests) >= 2 and len(woken) == 1, [_texts(r)[:200] for r in model.requests]
    assert '"conclusion":"failure"' in _texts(woken[0]) and "delivery 1" in _texts(woken[0])
    listed = _agent(home)
    assert (listed["deliveries_acked"], listed["pending"], listed["backlog"]) == (1, 0, 0)


def _agent(home: Path) -> dict:
    return json.loads(nerve("agent", "list", "--json", home=home).stdout)["agents"][0]
