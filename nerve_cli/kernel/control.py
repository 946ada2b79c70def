"""The control socket `data/nerve.sock`: JSON lines, owner-only.

The socket file is created mode 0600 and every connection's peer uid is
checked (SO_PEERCRED), so only the user running the engine can talk to it. A
malformed or oversized request gets an error answer; it never disturbs the
engine. One request, one answer, per line; a connection may send several.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any, Awaitable, Callable

MAX_REQUEST = 1024 * 1024

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ControlServer:
    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self.handler = handler
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
        try:
            if not _same_user(writer):
                await _answer(writer, {"ok": False, "error": "permission denied: the engine answers only its own user"})
                return
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    await _answer(writer, {"ok": False, "error": f"request larger than {MAX_REQUEST} bytes refused"})
                    return
                await _answer(writer, await self._handle(line))
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()

    async def _handle(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError as exc:
            return {"ok": False, "error": f"malformed request (not JSON): {exc}"}
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            return {"ok": False, "error": 'malformed request: expected {"op": "...", ...}'}
        try:
            return await self.handler(request)
        except Exception as exc:  # an engine bug must not kill the socket
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _same_user(writer: asyncio.StreamWriter) -> bool:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return False
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


async def _answer(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(json.dumps(body, default=str).encode() + b"\n")
    await writer.drain()
