"""The stdio transport of `nerve mcp`: the SDK's, with every malformed request answered.

The SDK drops a line it cannot read as a JSON-RPC message (its pydantic model
refuses it) without a word, so a client that sent it with an id waits for ever:
params that are a string, a lone surrogate (`"\\ud800"`), nesting deeper than
its parser goes. Each line is checked here first; one that the SDK would drop
gets the JSON-RPC 2.0 error answer instead — `-32700` (parse error) or
`-32600` (invalid request) with the request's own id when one can be found,
else with id null as the specification asks. A malformed notification (a
message without an id) gets no answer, as the specification says.

fd 0 is read through a private duplicate and pointed at /dev/null while the
server runs, and fd 1 written through one and pointed at stderr (as the SDK does
for the streams it opens), so nothing else in the process can read the client's
messages or write between them.

The session may start with lines `mcp.front` already read (`prefix`: the
client's handshake, replayed, and what the front did not answer); the answer
to the replayed `initialize` is dropped, and the SDK's answers to `initialize`
and the front's `KEPT` requests are kept for the next start (`kept.Answers`).
"""

import fcntl
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from nerve_cli.mcp.kept import KEPT, REPLAY_ID

_KEPT = ("initialize", *KEPT)

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
_NO_ID = object()  # the message has no "id" member: a notification
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class ScreenedLines:
    """The client's lines, less the malformed ones, which are answered through `answer` instead."""

    def __init__(self, lines: Any, prefix: list[str] | None = None, asked: dict[Any, tuple[str, Any]] | None = None
                 ) -> None:
        self.lines = _chain(prefix or [], lines)
        self.answer: Any = None  # the transport's write stream, set before the first line is read
        self.asked = asked  # id → (method, protocol version asked) of the requests whose answers are kept

    def __aiter__(self) -> "ScreenedLines":
        return self

    async def __anext__(self) -> str:
        async for line in self.lines:
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # whatever the SDK's model refuses, it would drop
                error = error_answer(line, exc)
                if error is not None:
                    await self.answer.send(SessionMessage(error))
                continue
            if isinstance(message, types.JSONRPCNotification) and _has_bad_id(line):
                # a request whose id no JSON-RPC id can be (9.5, true, an object) reads as a notification to
                # the SDK's model, which then answers nothing; the client waits for an answer to its id
                await self.answer.send(SessionMessage(types.JSONRPCError(
                    jsonrpc="2.0", id=None, error=types.ErrorData(
                        code=INVALID_REQUEST, message="not a valid request: id: a request's id is a string or an "
                                                      "integer"))))
                continue
            if self.asked is not None and isinstance(message, types.JSONRPCRequest) and message.method in _KEPT:
                params = message.params if isinstance(message.params, dict) else {}
                if message.method == "initialize" or not params.get("cursor"):  # a later page is not kept
                    self.asked[message.id] = (message.method, params.get("protocolVersion"))
            return line
        raise StopAsyncIteration


async def _chain(prefix: list[str], lines: Any) -> AsyncIterator[str]:
    for line in prefix:
        yield line
    async for line in lines:
        yield line


class Wire:
    """The SDK's writes to the client: the answer to the replayed initialize dropped, the answers kept noted."""

    def __init__(self, out: Any, answers: Any, asked: dict[Any, tuple[str, Any]]) -> None:
        self.out, self.answers, self.asked = out, answers, asked
        self.version: Any = None  # the protocol version the SDK negotiated

    async def write(self, text: str) -> None:
        if self.asked or REPLAY_ID in text:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") in self.asked and "result" in message:
                method, requested = self.asked.pop(message["id"])
                result = message["result"]
                if method == "initialize":
                    self.version = result.get("protocolVersion") if isinstance(result, dict) else None
                if self.answers is not None:
                    self.answers.keep(method, requested if method == "initialize" else self.version, result)
            if isinstance(message, dict) and message.get("id") == REPLAY_ID:
                return  # the client had the front's answer
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()


def _has_bad_id(line: str) -> bool:
    """Whether the line is an object with an `id` member that is neither a string nor an integer."""
    found = _top_level_id(line)
    return found is not _NO_ID and (isinstance(found, bool) or not isinstance(found, (str, int)))


def error_answer(line: str, exc: Exception) -> types.JSONRPCError | None:
    """The JSON-RPC error for a line that is not a valid message; None for a malformed notification."""
    try:
        message = json.loads(line)
        parsed = True
    except (ValueError, RecursionError):
        message, parsed = None, False
    request_id = message.get("id", _NO_ID) if isinstance(message, dict) else _top_level_id(line)
    if request_id is _NO_ID and isinstance(message, dict):
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        request_id = None  # absent, unreadable or of a type JSON-RPC ids cannot have
    problems = _problems(exc)
    unreadable = not parsed or any(kind == "json_invalid" for kind, _ in problems)
    code, what = (PARSE_ERROR, "not readable as JSON") if unreadable else (INVALID_REQUEST, "not a valid request")
    summary = "; ".join(text for _, text in problems[:3])[:300] or type(exc).__name__
    return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                              error=types.ErrorData(code=code, message=f"{what}: {summary}"))


def _problems(exc: Exception) -> list[tuple[str, str]]:
    """(kind, text) of each thing the SDK's model refused; one of a union's members where it tried them all."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return [("", str(exc))]
    found: list[tuple[str, str]] = []
    for error in errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error.get("loc", ()))
        text = f"{where}: {error['msg']}" if where else error["msg"]
        if text not in (t for _, t in found):
            found.append((error.get("type", ""), text))
    return found


def _top_level_id(text: str) -> Any:
    """The `id` member of the JSON object `text`, found without decoding its other members (which may nest
    deeper than any parser goes); `_NO_ID` when it has none, None when the text is not an object."""
    try:
        index = _skip(text, 0)
        if text[index] != "{":
            return None
        index = _skip(text, index + 1)
        while text[index] != "}":
            key, index = _DECODER.raw_decode(text, index)
            index = _skip(text, index)
            if text[index] != ":":
                return None
            index = _skip(text, index + 1)
            if key == "id":
                return _DECODER.raw_decode(text, index)[0]
            index = _skip(text, _past_value(text, index))
            if text[index] == ",":
                index = _skip(text, index + 1)
            elif text[index] != "}":
                return None
        return _NO_ID
    except (ValueError, IndexError, RecursionError):
        return None


def _skip(text: str, index: int) -> int:
    while text[index] in _WHITESPACE:
        index += 1
    return index


def _past_value(text: str, index: int) -> int:
    """Where the JSON value starting at `index` ends, counting brackets instead of decoding it."""
    if text[index] not in "[{":
        return _DECODER.raw_decode(text, index)[1]
    depth = 0
    while True:
        char = text[index]
        if char == '"':
            index = json.decoder.scanstring(text, index + 1)[1]  # type: ignore[attr-defined]
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1


@asynccontextmanager
async def stdio_transport(prefix: list[str] | None = None, answers: Any = None
                          ) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of the MCP session over this process's stdin and stdout, after `prefix`
    (lines `mcp.front` read); `answers`: where the SDK's answers to the kept requests go (`kept.Answers`)."""
    wire_in, wire_out = os.dup(0), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # stray prints (a library's, a tool's) reach stderr, never the client's stream
    asked: dict[Any, tuple[str, Any]] = {}
    lines = ScreenedLines(anyio.wrap_file(TextIOWrapper(os.fdopen(wire_in, "rb", closefd=False), encoding="utf-8",
                                                        errors="replace")), prefix, asked)
    out = Wire(anyio.wrap_file(TextIOWrapper(os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8")),
               answers, asked)
    try:
        # ScreenedLines reads like the anyio file the SDK takes (its async line iteration), Wire writes like one
        async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (read_stream, write_stream):
            lines.answer = write_stream
            yield read_stream, write_stream
    finally:
        os.dup2(wire_in, 0)
        os.close(wire_in)
        os.dup2(wire_out, 1)
        os.close(wire_out)
