"""`nerve mcp` start: spawn → `initialize` answered → `tools/list` answered, as an MCP client waits for it.

A client over pipes (plain JSON-RPC lines, as Claude Code or Cursor send them)
starts `nerve mcp --home H`, asks initialize, says initialized, lists the
tools, then calls one tool (`list_senses`: the SDK's server answers it, after
the hand-over) and closes. Each start is a fresh process; the first start of a
version keeps the SDK's answers (`nerve_cli/mcp/front.py`), the ones measured
are the starts after it. Also shown: the same with the kept answers removed
before each start (the SDK answers everything), and the first tool call.

Floor, same run: a bare `python -c pass`, start to exit. Goal: spawn →
tools/list answered ≤ 3× the floor.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import CLI_CWD, Report, bare_python_ms, engine_env, goal, machine

RUNS = 12
NERVE = [sys.executable, "-m", "nerve_cli"]


def session(home: Path, cache: Path, env: dict[str, str]) -> dict[str, float]:
    """One client session: ms from spawn to each answer."""
    started = time.perf_counter()
    proc = subprocess.Popen([*NERVE, "mcp", "--home", str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**env, "XDG_CACHE_HOME": str(cache)}, cwd=CLI_CWD)
    assert proc.stdin is not None and proc.stdout is not None
    out: dict[str, float] = {}

    def ask(request_id: int, method: str, params: dict) -> dict:
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
                          + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"bench: nerve mcp closed before answering {method}")
            answer = json.loads(line)
            if answer.get("id") == request_id:
                out[method] = (time.perf_counter() - started) * 1000
                return answer

    try:
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "1"}})
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        tools = ask(2, "tools/list", {})
        assert len(tools["result"]["tools"]) > 10, tools
        called = ask(3, "tools/call", {"name": "list_senses", "arguments": {}})
        assert not called["result"].get("isError"), called
    finally:
        proc.stdin.close()
        proc.wait(30)
    return out


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="nerve-bench-mcp-"))
    try:
        home = root / "home"
        env = engine_env()
        subprocess.run([*NERVE, "init", "--home", str(home)], check=True, capture_output=True, env=env, cwd=CLI_CWD)
        kept, cold = root / "kept", root / "cold"
        session(home, kept, env)  # the first start of this version keeps the SDK's answers
        fast, slow = [], []
        for _ in range(RUNS):  # interleaved: the same machine state for both
            fast.append(session(home, kept, env))
            shutil.rmtree(cold, ignore_errors=True)
            slow.append(session(home, cold, env))
        bare = bare_python_ms()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    load = os.getloadavg()[0]
    report = Report(f"`nerve mcp` start, {RUNS} fresh processes each ({machine()})")
    listed = med(fast, "tools/list")
    report.row("spawn → initialize answered", f"{med(fast, 'initialize'):.0f} ms", f"bare python {bare:.0f} ms")
    report.row("spawn → tools/list answered", f"{listed:.0f} ms ({listed / bare:.1f}×)", f"bare python {bare:.0f} ms",
               "≤ 3×", listed <= 3 * bare)
    report.row("spawn → the first tool call answered", f"{med(fast, 'tools/call'):.0f} ms")
    report.row("the same with no kept answers: initialize / tools/list / tool call",
               f"{med(slow, 'initialize'):.0f} / {med(slow, 'tools/list'):.0f} / {med(slow, 'tools/call'):.0f} ms")
    report.note(f"load {load:.1f}; the kept answers are the SDK's own, written at the first start of a version")
    report.print()
    goal("`nerve mcp` spawn → tools/list answered", f"{listed:.0f} ms ({listed / bare:.1f}×)",
         f"bare `python -c pass` {bare:.0f} ms", "≤ 3×", listed <= 3 * bare)


if __name__ == "__main__":
    main()
