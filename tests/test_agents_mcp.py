"""The agents' long poll over MCP: `wait_for_events` / `ack_events` of a real `nerve mcp` process, no engine."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from conftest import nerve
from contractkit import Checked
from enginekit import write_instance
from loadclock import scaled
from mcp import ClientSession
from test_mcp_server import _mcp  # a real `nerve mcp` through the SDK's stdio client

from nerve_cli.ops.emit import emit_event

pytestmark = pytest.mark.timeout(120)
CHECKED = Checked()
KINDS = {"wait_for_events": "agent-delivery", "ack_events": "agent-ack"}
CONFIG = """
agents:
  coder: {on: [ci.done], start: all}
"""


async def _call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    return CHECKED.doc(KINDS[tool], result.structured_content, f"{tool}({args})")


def test_a_waiter_is_woken_by_a_matching_event_only_and_times_out_plainly(home):
    write_instance(home, CONFIG, {})

    async def body(session: ClientSession) -> None:
        quiet = await _call(session, "wait_for_events", agent="coder", timeout_s=0.3)
        assert quiet["timed_out"] is True and quiet["delivery"] is None
        waiting = asyncio.ensure_future(_call(session, "wait_for_events", agent="coder", timeout_s=30,
                                              match={"conclusion": "failure"}))
        await asyncio.sleep(0.5)
        emit_event(home, "ci.done", {"job": 1, "conclusion": "success"})
        await asyncio.sleep(1.0)
        assert not waiting.done(), "a non-matching event woke the waiter"
        started = time.monotonic()
        emit_event(home, "ci.done", {"job": 2, "conclusion": "failure"})
        woke = await asyncio.wait_for(waiting, scaled(10))
        assert time.monotonic() - started < scaled(2)
        assert [e["payload"]["job"] for e in woke["events"]] == [2] and woke["timed_out"] is False
        again = await _call(session, "wait_for_events", agent="coder", timeout_s=1, match={"conclusion": "failure"})
        assert (again["delivery"], again["redelivered"]) == (woke["delivery"], True)  # pending until acknowledged
        acked = await _call(session, "ack_events", agent="coder", deliveries=[woke["delivery"]])
        assert acked["acked"] == [woke["delivery"]]
        rest = await _call(session, "wait_for_events", agent="coder", timeout_s=1)
        assert [e["payload"]["job"] for e in rest["events"]] == [1]  # the success stayed for a caller without match
        bad = await session.call_tool("wait_for_events", {"agent": "codr", "timeout_s": 0})
        assert bad.is_error and "no agent 'codr'" in bad.content[0].text

    _mcp(home, body)


def test_a_client_killed_mid_wait_gets_the_event_once_when_it_reconnects(home, tmp_path):
    write_instance(home, CONFIG, {})
    script = tmp_path / "client.py"
    script.write_text(f"""
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
async def main():
    params = StdioServerParameters(command=sys.executable, args=["-m", "nerve_cli", "mcp", "--home", {str(home)!r}])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            print("waiting", flush=True)
            await session.call_tool("wait_for_events", {{"agent": "coder", "timeout_s": 600}})
            print("woke", flush=True)
asyncio.run(main())
""")
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert client.stdout is not None and client.stdout.readline().strip() == "waiting"
    os.killpg(client.pid, signal.SIGKILL)  # the client and its server, mid-wait
    client.wait()
    emit_event(home, "ci.done", {"job": 7})

    async def body(session: ClientSession) -> dict:
        first = await _call(session, "wait_for_events", agent="coder", timeout_s=10)
        await _call(session, "ack_events", agent="coder", deliveries=[first["delivery"]])
        return first

    first = _mcp(home, body)
    assert [e["payload"] for e in first["events"]] == [{"job": 7}]
    after = json.loads(nerve("agent", "next", "coder", "--json", home=home).stdout)
    assert after["delivery"] is None and after["events"] == []  # once: acknowledged, nothing comes back


def test_fifty_waiters_at_once_each_woken_by_its_own_event(home):
    write_instance(home, CONFIG, {})

    async def body(session: ClientSession) -> None:
        waiters = [asyncio.ensure_future(_call(session, "wait_for_events", agent="coder", timeout_s=60,
                                               match={"n": n})) for n in range(50)]
        await asyncio.sleep(1.0)
        started = time.monotonic()
        listed = await session.call_tool("list_senses", {})  # the server still answers other calls at once
        assert not listed.is_error and time.monotonic() - started < scaled(5)
        for n in range(50):
            emit_event(home, "ci.done", {"n": n})
        done = await asyncio.wait_for(asyncio.gather(*waiters), scaled(30))
        assert [[e["payload"]["n"] for e in d["events"]] for d in done] == [[n] for n in range(50)]
        assert len({d["delivery"] for d in done}) == 50

    _mcp(home, body)


def test_nerve_init_writes_an_agents_md_whose_tools_and_commands_exist(tmp_path):
    import re

    from conftest import cli

    from nerve_cli.mcp.server import build

    home = tmp_path / "instance"
    assert cli("init", "--home", str(home)).exit_code == 0
    text = (home / "AGENTS.md").read_text()
    assert "AGENTS.md" in subprocess.run(["git", "ls-files"], cwd=home, capture_output=True, text=True).stdout
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", text))
    tools = {t.name for t in asyncio.run(build(home).list_tools())}
    assert named and named <= tools, named - tools
    for step in ("new_sense", "migrate_sense", "dry_run_sense", "enable_sense", "wait_for_events"):
        assert step in named
    for command in re.findall(r"`(nerve (?:sense|agent|config) [a-z]+)", text):
        assert cli(*command.split()[1:], "--help").exit_code == 0, command
