"""The control socket `data/nerve.sock`: JSON lines, owner-only.

The socket file is created mode 0600 and every connection's peer uid is
checked (SO_PEERCRED), so only the user running the engine can talk to it. A
malformed, oversized or too deeply nested request gets an error answer; it
never disturbs the engine. One request, one answer, per line; a connection may
send several.

Connections are bounded, because each holds one of the kernel's file
descriptors, which its workers and databases need: at most `MAX_CONNECTIONS`
at once (the next is answered "busy" and closed, and the engine logs one line
when the cap is reached), and one that sends no request for `IDLE_TIMEOUT` is
closed. A thousand idle clients once exhausted the kernel's fds.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any, Awaitable, Callable

from nerve_cli.kernel.control.cap import ConnectionCap
from nerve_cli.wire.control import MAX_REQUEST, dumps, loads

MAX_CONNECTIONS = 64  # the CLI opens one per request; `nerve top` one at a time
IDLE_TIMEOUT = 60.0  # seconds a connection may wait before sending its next request
MAX_DEPTH = 32  # nesting of a request's JSON (an emit payload included)
INLINE_PARSE = 256 * 1024  # a request line longer than this is decoded off the loop

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
OnEvent = Callable[[str, dict[str, Any]], None]


class ControlServer:
    def __init__(self, path: Path, handler: Handler, on_event: OnEvent | None = None) -> None:
        self.path = path
        self.handler = handler
        self.on_event = on_event  # ("control_busy", detail) once each time the cap is reached
        self.cap = ConnectionCap(MAX_CONNECTIONS, self._busy)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()  # stale: we hold the instance lock, so no live engine owns it
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_REQUEST)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                pass
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.cap.admit():
            error = f"the engine is busy: {self.cap.limit} connections are open; try again"
            self.cap.refuse(writer, json.dumps({"ok": False, "error": error}).encode() + b"\n")
            return
        try:
            if not _same_user(writer):
                await _answer(writer, {"ok": False, "error": "permission denied: the engine answers only its own user"})
                return
            while True:
                try:
                    line = await asyncio.wait_for(reader.readuntil(b"\n"), IDLE_TIMEOUT)
                except (asyncio.IncompleteReadError, asyncio.TimeoutError):
                    return  # closed by the client, or idle too long
                except asyncio.LimitOverrunError:
                    await _answer(writer, {"ok": False, "error": f"request larger than {MAX_REQUEST} bytes refused"})
                    return
                await _answer(writer, await self._handle(line))
        except (ConnectionError, OSError):
            return
        finally:
            self.cap.release()
            writer.close()

    @property
    def connections(self) -> int:
        return self.cap.open

    def _busy(self, connections: int, limit: int) -> None:
        if self.on_event is not None:
            self.on_event("control_busy", {"connections": connections, "limit": limit, "idle_timeout_s": IDLE_TIMEOUT})

    async def _handle(self, line: bytes) -> dict[str, Any]:
        if len(line) > INLINE_PARSE:  # megabytes of JSON: decoded in a thread while the loop keeps its timers
            request = await asyncio.get_running_loop().run_in_executor(None, parse_request, line)
        else:
            request = parse_request(line)
        if "op" not in request:
            return request
        try:
            return await self.handler(request)
        except Exception as exc:  # an engine bug must not kill the socket
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def parse_request(line: bytes) -> dict[str, Any]:
    """One request line → the request, or the error answer for a malformed one (never raises).

    Decoded as `wire.control.loads` says: exactly, an integer past 64 bits included.
    """
    try:
        request = loads(line)
    except RecursionError:
        return _too_deep()
    except ValueError as exc:  # orjson.JSONDecodeError and json's are both ValueErrors
        if "depth limit" in str(exc):  # orjson's own depth limit, far past ours
            return _too_deep()
        return {"ok": False, "error": f"malformed request (not JSON): {exc}"}
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        return {"ok": False, "error": 'malformed request: expected {"op": "...", ...}'}
    if too_deep(line, request):
        return _too_deep()
    return request


def _too_deep() -> dict[str, Any]:
    return {"ok": False, "error": f"malformed request: nested deeper than {MAX_DEPTH} levels"}


def too_deep(line: bytes, request: Any) -> bool:
    """Whether the arrays and objects of `request` (decoded from `line`) nest deeper than `MAX_DEPTH`.

    A walk in Python: in the thread that decodes a large request it gives the
    loop its turn every few milliseconds, where one long C call (a regex over
    megabytes) would hold it. A line with few brackets is not walked at all.
    """
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return False
    stack = [(request, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


def _same_user(writer: asyncio.StreamWriter) -> bool:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return False
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


async def _answer(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(dumps(body))
    await writer.drain()
