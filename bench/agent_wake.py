"""Agents: emit → `nerve agent wait` returns, beside emit → a listener's compute start; MCP long-poll wake; hook POST.

One engine (`nerve run --webhooks`) with sense `l` listening to channel `go`
and agent `coder` hearing it. Three figures, each beside its floor from the
same run:

- **emit → `nerve agent wait` returns**: a real `nerve agent wait coder`
  process is waiting (started, given time to settle into its poll); the event
  `{t: monotonic_ns()}` is emitted through the control socket; the figure ends
  when the parent sees the process exit (what a harness waits for). Beside it,
  emit → listener: sense `l` takes `monotonic_ns()` first thing in its compute
  for the same emits.
- **MCP long-poll wake**: a `wait_for_events` call of a real `nerve mcp`
  (through the SDK's stdio client) is waiting; emit; until its answer arrives.
  Floor: a `list_senses` call's round trip on the same session.
- **hook POST → answer**: a Claude Code PostToolUse body posted to a webhook
  channel keyed by `body.tool_use_id` (committed to events.db before the 202),
  as an HTTP hook would; floor: a POST to a channel that does not exist (404,
  nothing stored) on the same server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import CLI_CWD, Engine, Report, engine_env, goal, instance, machine, median, pct, signals, wait_until

SAMPLES = 20
SETTLE = 3.0  # seconds a fresh `nerve agent wait` is given to start (at load 8 it needs more than 1)
POSTS = 200
CONFIG = """
engine:
  webhooks: {port}
channels:
  hooks: {{webhook: true, key: body.tool_use_id}}
senses:
  l: {{group: g1}}
reflexes:
  - {{sense: l, on: [go]}}
agents:
  coder: {{on: [go], start: new}}
  poller: {{on: [go], start: new}}
"""
LISTENER = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    one = len(trigger.events) == 1
    return {"lat": t0 - trigger.events[0].payload["t"] if one else None}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ms(value: float) -> str:
    return f"{value:,.1f} ms"


def hook_waits(home: Path, engine: Engine) -> list[float]:
    """emit → `nerve agent wait` exits, in ms."""
    out = []
    env = engine_env()
    for _ in range(SAMPLES):
        proc = subprocess.Popen([sys.executable, "-m", "nerve_cli", "agent", "wait", "coder", "--home", str(home),
                                 "--timeout", "60s"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, cwd=CLI_CWD)
        time.sleep(SETTLE)  # started, acknowledged the previous delivery, polling
        t = time.monotonic_ns()
        engine.request("emit", channel="go", payload={"t": t})
        proc.wait(60)
        out.append((time.monotonic_ns() - t) / 1e6)
    return out


async def mcp_waits(home: Path, engine: Engine) -> tuple[list[float], list[float]]:
    """(emit → wait_for_events answers, list_senses round trips), in ms."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "nerve_cli", "mcp", "--home", str(home)],
                                    env=engine_env(), cwd=CLI_CWD)
    woke, floor = [], []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(SAMPLES):
                started = time.monotonic_ns()
                await session.call_tool("list_senses", {})
                floor.append((time.monotonic_ns() - started) / 1e6)
                waiting = asyncio.ensure_future(session.call_tool("wait_for_events", {"agent": "poller",
                                                                                      "timeout_s": 60}))
                await asyncio.sleep(0.5)
                t = time.monotonic_ns()
                await asyncio.to_thread(engine.request, "emit", channel="go", payload={"t": t})
                answer = await waiting
                woke.append((time.monotonic_ns() - t) / 1e6)
                delivery = answer.structured_content["delivery"]
                await session.call_tool("ack_events", {"agent": "poller", "deliveries": [delivery]})
    return woke, floor


def posts(port: int, channel: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        body = json.dumps({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash",
                           "tool_use_id": f"toolu_{time.monotonic_ns()}_{i}", "tool_input": {"command": "ls"}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/emit/{channel}", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic_ns()
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            exc.read()
        out.append((time.monotonic_ns() - started) / 1e6)
    return out


def main() -> None:
    port = free_port()
    with instance(CONFIG.format(port=port), {"l": LISTENER}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=1)
            subprocess.run([sys.executable, "-m", "nerve_cli", "agent", "next", "poller", "--home", str(home)],
                           capture_output=True, env=engine_env(), cwd=CLI_CWD)  # its first look
            waited = hook_waits(home, engine)
            wait_until(lambda: len(signals(home, "l")) >= SAMPLES, 60)
            heard = [s["payload"]["lat"] / 1e6 for s in signals(home, "l") if s["payload"]["lat"] is not None]
            woke, floor = asyncio.run(mcp_waits(home, engine))
            hooked, missing = posts(port, "hooks", POSTS), posts(port, "no-such-channel", POSTS)
    report = Report(f"agents: emit → the agent's wait, MCP long poll, hook POST ({machine()})")
    report.row("emit → `nerve agent wait` returns, median / p99", f"{ms(median(waited))} / {ms(pct(waited, 99))}",
               f"emit → listener compute {ms(median(heard))} / {ms(pct(heard, 99))}", "median ≤ 100 ms",
               median(waited) <= 100)
    report.row("emit → MCP wait_for_events answers, median / p99", f"{ms(median(woke))} / {ms(pct(woke, 99))}",
               f"list_senses round trip {ms(median(floor))}", "median ≤ 100 ms", median(woke) <= 100)
    report.row("hook POST → 202 (stored), median / p99", f"{ms(median(hooked))} / {ms(pct(hooked, 99))}",
               f"POST → 404 (nothing stored) {ms(median(missing))}", "p99 ≤ 50 ms", pct(hooked, 99) <= 50)
    goal("emit → `nerve agent wait` returns, median", ms(median(waited)), f"listener {ms(median(heard))}",
         "≤ 100 ms", median(waited) <= 100)
    goal("hook POST → answer, p99", ms(pct(hooked, 99)), f"404 {ms(pct(missing, 99))}", "≤ 50 ms",
         pct(hooked, 99) <= 50)
    report.note(f"{SAMPLES} waits and long polls, one at a time (each wait a fresh process, given {SETTLE:g} s to settle "
                f"into its 20 ms poll of the databases' data_version); {POSTS} posts one after another")
    report.print()


if __name__ == "__main__":
    main()
