"""`nerve mcp`'s first answers, before the SDK is loaded.

An MCP client starts `nerve mcp` and waits for `initialize`, then lists the
tools; many clients time out a server that is slow to start. Importing the
official SDK with its pydantic models, building every tool's schema and
starting its session cost a second here, and none of it changes between two
starts of one version. So the SDK's own answers to `initialize` and
`tools/list` are kept (`Answers`, written the first time a full server gave
them, in `$XDG_CACHE_HOME/nerve/mcp/`), keyed by what they are made of (this
package's and the contract's files, the SDK's version); a start with kept
answers gives them itself, byte for byte what the SDK said, from the standard
library alone. At the first request it does not keep (a tool call, a
resource...), it hands the session to the SDK's server: the client's own
`initialize` and `initialized` are replayed to it first (its answer to the
replay is dropped: the client had it), then every line as the client sent it.

Anything unexpected (options this front does not know, no instance, no kept
answers, a line it cannot read) goes the usual way, through the full server.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from nerve_cli.mcp.kept import KEPT, REPLAY_ID, Answers

DEBUG_ENV = "NERVE_MCP_DEBUG"  # set: say on stderr which answers came from the kept ones (tests)


def serve(argv: list[str]) -> int | None:
    """Serve `nerve mcp ARGV` from the kept answers, then hand over to the SDK; None: not this way (options
    the front does not know, no instance, no kept answers), the caller runs the full command."""
    home = _home(argv)
    if home is None:
        return None
    answers = Answers.here()
    if not answers.load():
        return None
    front = Front(answers)
    replay = front.run()
    if replay is None:
        return 0  # the client closed before asking anything the front does not keep: nothing to serve
    from nerve_cli.mcp.server import serve_after

    serve_after(home, replay, answers)
    return 0


def _home(argv: list[str]) -> Path | None:
    if argv == []:
        option = None
    elif len(argv) == 2 and argv[0] == "--home":
        option = argv[1]
    elif len(argv) == 1 and argv[0].startswith("--home="):
        option = argv[0].split("=", 1)[1]
    else:
        return None
    from nerve_cli.errors import NerveError  # only for a --home to check: the fast start imports nothing more
    from nerve_cli.home import require_instance

    try:
        return require_instance(option or None)
    except NerveError:
        return None  # the full command says what is wrong, as it always has


class Front:
    """Read the client's lines and answer what is kept, until one that is not."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.initialize: str | None = None  # the client's initialize line, as sent
        self.initialized: str | None = None
        self.version: Any = None  # the protocol version the kept initialize answer negotiated
        self.buffer = b""
        self.said: list[str] = []
        self.loading: threading.Thread | None = None

    def run(self) -> list[str] | None:
        """The lines to give the SDK's server, in order: the replayed handshake, then what was not answered;
        None: the client closed the session first."""
        while True:
            line = self._line()
            if line is None:
                self._handover([])  # (says what was answered)
                return None
            if not line.strip():
                continue
            message = _request(line)
            answer = self._answer(message) if message is not None else None
            if answer is None:
                return self._handover([line])
            if isinstance(answer, dict):
                self._send(answer)

    def _answer(self, message: dict[str, Any]) -> dict[str, Any] | bool | None:
        """The answer for a kept request, True for a message needing none, None: the SDK's to answer."""
        method, params, has_id = message.get("method"), message.get("params"), "id" in message
        if method == "initialize" and self.initialize is None and has_id and isinstance(params, dict):
            kept = self.answers.get(method, params.get("protocolVersion"))
            if not isinstance(kept, dict):
                return None  # a version no client asked for before: the SDK negotiates it (and it is kept)
            self.initialize, self.version = json.dumps({**message, "id": REPLAY_ID}), kept.get("protocolVersion")
            self.said.append("initialize")
            return _result(message["id"], kept)
        if self.initialize is None:
            return None  # anything before initialize: the SDK says what it says
        if method == "notifications/initialized" and not has_id and self.initialized is None:
            self.initialized = json.dumps(message)
            return True
        kept = self.answers.get(method, self.version) if method in KEPT else None
        if kept is not None and has_id and not (params if isinstance(params, dict) else {}).get("cursor"):
            self.said.append(str(method))
            self._load_in_background()  # the client's next request is likely a call: the SDK loads meanwhile
            return _result(message["id"], kept)
        if method == "ping" and has_id:
            return _result(message["id"], {})
        return None

    def _handover(self, pending: list[str]) -> list[str]:
        if os.environ.get(DEBUG_ENV) and self.said:
            print(f"nerve mcp: {', '.join(self.said)} answered from the kept answers", file=sys.stderr)
        lines = [line for line in (self.initialize, self.initialized) if line is not None]
        rest = self.buffer.decode("utf-8", "replace").splitlines(keepends=True) if self.buffer else []
        return [*lines, *pending, *rest]

    def _line(self) -> str | None:
        while b"\n" not in self.buffer:
            chunk = os.read(0, 65536)
            if not chunk:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    return line.decode("utf-8", "replace")
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace") + "\n"

    def _send(self, answer: dict[str, Any]) -> None:
        data = (json.dumps(answer, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        while data:
            data = data[os.write(1, data):]

    def _load_in_background(self) -> None:
        if self.loading is None:
            self.loading = threading.Thread(target=_import_server, name="nerve-mcp-load", daemon=True)
            self.loading.start()


def _import_server() -> None:
    import nerve_cli.mcp.server  # noqa: F401  (the import lock makes the handover wait for it, not do it twice)


def _request(line: str) -> dict[str, Any] | None:
    """A JSON-RPC message the front may answer; None: anything else (the SDK and its screening answer it)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        return None
    return message


def _result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
