"""`nerve mcp` answers initialize and tools/list before loading the SDK, with the SDK's own answers.

The first start of a version keeps what the SDK's server answered (mcp/front.py); a start after it gives
those answers from the standard library alone, then hands the session to the SDK at the first request it
does not keep. These tests fail if that fast path stops applying (the front no longer says it answered),
if its answers drift from the SDK's, or if the hand-over loses the client's handshake.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from enginekit import write_instance

pytestmark = pytest.mark.timeout(120)
SAID = "initialize, tools/list answered from the kept answers"


class Client:
    def __init__(self, home: Path, cache: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
        env.update(XDG_CACHE_HOME=str(cache), NERVE_MCP_DEBUG="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "nerve_cli", "mcp", "--home", str(home)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(self, request_id: Any, method: str, params: dict | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.close()
        answer = json.loads(line)
        assert answer["id"] == request_id, answer
        return answer

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def handshake(self, version: str = "2025-06-18") -> tuple[dict, dict]:
        init = self.ask(1, "initialize", {"protocolVersion": version, "capabilities": {},
                                          "clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init["result"], self.ask(2, "tools/list")["result"]

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        return self.proc.stderr.read().decode()


def test_a_second_start_answers_from_the_kept_answers_and_hands_the_session_over(home: Path,
                                                                                  tmp_path: Path) -> None:
    write_instance(home, "senses:\n  s: {}\n", {"s": "def compute(db, peers):\n    return 1\n"})
    cache = tmp_path / "cache"
    first = Client(home, cache)
    init, tools = first.handshake()
    assert SAID not in first.close()  # nothing kept yet: the SDK answered, and its answers were kept
    assert list((cache / "nerve" / "mcp").glob("*.json"))

    second = Client(home, cache)
    assert second.handshake() == (init, tools)  # the SDK's answers, as it gave them
    called = second.ask(3, "tools/call", {"name": "list_senses", "arguments": {}})  # the SDK's, after the hand-over
    assert [s["name"] for s in called["result"]["structuredContent"]["senses"]] == ["s"]
    assert second.ask("p", "ping")["result"] == {}
    assert SAID in second.close()

    other = Client(home, cache)  # a protocol version no client asked for before: the SDK negotiates it
    again, listed = other.handshake("2025-03-26")
    assert again["protocolVersion"] == "2025-03-26" and listed == tools
    assert SAID not in other.close()
    after = Client(home, cache)  # and it is kept for the next start that asks for it
    assert after.handshake("2025-03-26") == (again, listed)
    assert SAID in after.close()


def test_a_request_before_initialize_and_a_malformed_line_are_the_sdks_to_answer(home: Path, tmp_path: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    cache = tmp_path / "cache"
    Client(home, cache).handshake()  # (keeps the answers)
    early = Client(home, cache)
    listed = early.ask(1, "tools/list")  # before initialize: not the front's
    assert "tools" in listed.get("result", {}) or "error" in listed
    early.close()
    late = Client(home, cache)
    late.handshake()
    assert late.proc.stdin is not None and late.proc.stdout is not None
    late.proc.stdin.write(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": "list_senses"}\n')
    late.proc.stdin.flush()
    answer = json.loads(late.proc.stdout.readline())
    assert answer["id"] == 9 and answer["error"]["code"] == -32600, answer  # the transport's screening
    assert SAID in late.close()


def test_unknown_options_and_a_missing_instance_take_the_full_command(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "nerve_cli", "mcp", "--home", str(tmp_path / "none")],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert missing.returncode == 1 and "no Nerve instance" in missing.stdout + missing.stderr
    helped = subprocess.run([sys.executable, "-m", "nerve_cli", "mcp", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0 and "Example: nerve mcp" in helped.stdout
