"""The MCP server: Nerve's tools over stdio with the official SDK (`mcp` 2.x, `MCPServer`).

Register it with a client as a stdio server running `nerve mcp --home PATH`
(README: "Agents: nerve mcp"). Each tool returns a JSON object (structured
content, also as text) — the same document the matching CLI command prints
with --json (nerve_cli.contract), or one only MCP answers (`sense-query`,
`log-list`, `thread-start`); each tool advertises its document's shipped JSON
Schema as its output schema. A failure returns `is_error` with the CLI's
error document `{"version", "error": {"type", "message", "exit_code", ...}}`
as its text. stdout carries the
protocol only: nothing here prints.

No `from __future__ import annotations`: the SDK reads each tool's signature
at registration to build its JSON schema.
"""

import copy
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from nerve_cli.contract import errors as error_docs
from nerve_cli.contract.schema import schema
from nerve_cli.errors import ErrorType
from nerve_cli.mcp.tools import Tools, error_document
from nerve_cli.mcp.transport import stdio_transport

INSTRUCTIONS = """Nerve is a local observation engine: senses (small Python functions with their own SQLite
database) observe the world on schedules or on signals, and workflows run multi-role threads. Start with
list_senses (each with its last signal), then show_sense or query_sense (read-only SQL on one sense's
database; see its tables with show_sense or `SELECT name, sql FROM sqlite_master`). query_logs reads the
engine's log. emit sends an event to a channel (stored for the next start when no engine runs);
compute_sense and start_thread need the engine running (`nerve run`). Threads waiting
for a person are listed by list_threads(status="waiting"); approve_thread / reject_thread answer them."""



def document(kind: str) -> Any:
    """A tool's return annotation: a CallToolResult carrying the `kind` document, advertised to clients with
    that document's JSON Schema (nerve_cli/contract/schemas/<kind>.json) as the tool's output schema.

    The SDK validates structured content against the annotation's pydantic model: here any object (the
    tests validate every answer against the schema itself, and jsonschema is no runtime dependency)."""
    published = copy.deepcopy(schema(kind))

    class Document(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
            return published

    Document.__name__ = Document.__qualname__ = f"Document[{kind}]"
    return Annotated[CallToolResult, Document]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class NerveServer(MCPServer):
    """MCPServer whose refusal of a tool's arguments (a wrong type, a value not among the choices) is the
    `usage` error document, exit code 2, as the CLI's refusal of a bad option is, not the SDK's own text;
    served over stdio by `transport`, which answers the malformed requests the SDK would drop."""

    async def run_stdio_async(self) -> None:
        async with stdio_transport() as (read_stream, write_stream):
            # as MCPServer.run_stdio_async, with this transport
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                                 for error in exc.__cause__.errors(include_url=False))
            document = error_docs.error(ErrorType.USAGE, f"Invalid arguments for {name}: {problems}", 2)
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(document, ensure_ascii=False))],
                                  is_error=True)


def build(home: Path) -> MCPServer:
    tools = Tools(home)
    app = NerveServer("nerve", instructions=INSTRUCTIONS)

    def call(fn: Any, *args: Any, **kwargs: Any) -> CallToolResult:
        """The document as structured content and as JSON text; a failure as the error document (is_error)."""
        try:
            document = fn(*args, **kwargs)
        except Exception as exc:  # every failure becomes the error document, for the model to read
            text = json.dumps(error_document(exc), ensure_ascii=False, default=str)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        text = json.dumps(document, ensure_ascii=False, default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))

    @app.tool(annotations=READ)
    def list_senses() -> document("sense-list"):
        """Every sense with its group, triggers, signal count and last signal (time and payload)."""
        return call(tools.list_senses)

    @app.tool(annotations=READ)
    def show_sense(sense: str, limit: int = 20) -> document("sense-show"):
        """One sense: its settings, tables with row counts, and its last `limit` signals (oldest first)."""
        return call(tools.show_sense, sense, limit)

    @app.tool(annotations=READ)
    def query_sense(sense: str, sql: str, params: list[Any] | None = None, max_rows: int = 100,
                    timeout_s: float = 2.0) -> document("sense-query"):
        """One read-only SQL statement (SELECT, WITH, read-only PRAGMA table_info...) on a sense's SQLite
        database, with ? parameters. Writes are refused before they run. At most max_rows rows (≤ 1000) and
        16 MiB of values (`truncated_by` says which bound stopped it), no single value over 16 MiB, and
        timeout_s seconds (≤ 10). Signals are in `_signals`
        (id, ts unix ms, payload JSON); `signals_view` adds ISO time."""
        return call(tools.query_sense, sense, sql, params, max_rows, timeout_s)

    @app.tool(annotations=READ)
    def query_logs(source: Literal["reflex", "workflow", "system", "signal"] | None = None,
                   type: str | None = None, ref: str | None = None, since: str | None = None,
                   limit: int = 50) -> document("log-list"):
        """The engine's log, newest last: filter by source, type (e.g. error, run_complete), ref (a sense
        name or a thread id like run-7) and since (1h, 7d or a UTC date); at most limit rows (≤ 1000)."""
        return call(tools.query_logs, source, type, ref, since, limit)

    @app.tool(annotations=READ)
    def list_threads(status: Literal["queued", "started", "waiting", "completed", "failed", "crashed",
                                     "dropped"] | None = None,
                     workflow: str | None = None, limit: int = 20) -> document("thread-list"):
        """Workflow threads, newest first. status="waiting": threads waiting for a person (reason: the question)."""
        return call(tools.list_threads, status, workflow, limit)

    @app.tool(annotations=READ)
    def show_thread(run_id: str) -> document("thread-show"):
        """One thread (run-7): status, prompt, timings, why it ended, its events and every message with meta."""
        return call(tools.show_thread, run_id)

    @app.tool(annotations=READ)
    def engine_status() -> document("status"):
        """The running engine: workers, each sense's state and schedule, workflows (needs `nerve run`)."""
        return call(tools.status)

    @app.tool(annotations=ACT)
    def emit(channel: str, payload: Any = None, key: str | None = None) -> document("emit"):
        """Send an event to an external channel (a name in a reflex's on: list) with a JSON payload: it is
        committed before the answer and its listeners compute (delivered at the next start if no engine runs).
        A key makes a resend of the same event a no-op."""
        return call(tools.emit, channel, payload, key)

    @app.tool(annotations=ACT)
    def compute_sense(sense: str) -> document("sense-compute"):
        """Run one compute of a sense now, in the engine's worker; returns its outcome and payload."""
        return call(tools.compute_sense, sense)

    @app.tool(annotations=ACT)
    def start_thread(workflow: str, prompt: str, ctx: Context, max_rounds: int | None = None) -> document("thread-start"):
        """Start a thread of a workflow with a prompt; returns its run id (follow it with show_thread)."""
        return call(tools.start_thread, workflow, prompt, max_rounds, client_name(ctx))

    @app.tool(annotations=ACT)
    def approve_thread(run_id: str, ctx: Context, note: str | None = None) -> document("thread-answer"):
        """Approve a thread waiting for a person; the note is the next message its moderator sees."""
        return call(tools.answer_thread, run_id, "approve", note, client_name(ctx))

    @app.tool(annotations=ACT)
    def reject_thread(run_id: str, ctx: Context, note: str | None = None) -> document("thread-answer"):
        """Reject a thread waiting for a person; it resumes and its moderator decides what follows."""
        return call(tools.answer_thread, run_id, "reject", note, client_name(ctx))

    return app


def client_name(ctx: Any) -> str | None:
    """The MCP client's own name (and version), as it introduced itself at initialize; None if it did not."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    name = getattr(info, "name", None)
    if not isinstance(name, str) or not name:
        return None
    version = getattr(info, "version", None)
    return f"{name} {version}" if isinstance(version, str) and version else name


def serve(home: Path) -> None:
    """Serve on stdin/stdout until the client closes them."""
    build(home).run()
