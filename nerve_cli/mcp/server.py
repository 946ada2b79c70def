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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from nerve_cli import __version__
from nerve_cli.contract import errors as error_docs
from nerve_cli.contract.schema import schema
from nerve_cli.errors import ErrorType
from nerve_cli.mcp.tools import LOGS_LIMIT, SIGNALS_LIMIT, THREADS_LIMIT, Tools, error_document
from nerve_cli.mcp.transport import stdio_transport
from nerve_cli.store.readquery import MAX_ROWS, MAX_TIMEOUT

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

# any JSON value, typed as each of the six (MCP clients' strict checks refuse an untyped `{}`)
JsonValue = Annotated[Any, WithJsonSchema({"anyOf": [{"type": t} for t in ("object", "array", "string", "number",
                                                                           "boolean", "null")]})]
Sense = Annotated[str, Field(description="the sense's name (senses: in nerve.yaml; list_senses lists them)")]
RunId = Annotated[str, Field(description="a thread's id, like run-7 (list_threads lists them)")]
Note = Annotated[str | None, Field(description="the answer the thread's moderator sees next (default: approved "
                                               "or rejected)")]

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
        known = sorted(tool.name for tool in self._tool_manager.list_tools())
        if name not in known:  # the SDK's answer is plain text; an agent reads the error document everywhere
            document = error_docs.error(ErrorType.USAGE, f"no tool {name!r}: the tools are {', '.join(known)}", 2)
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(document, ensure_ascii=False))],
                                  is_error=True)
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
    app = NerveServer("nerve", title="Nerve", version=__version__, instructions=INSTRUCTIONS)

    def call(fn: Any, *args: Any, **kwargs: Any) -> CallToolResult:
        """The document as structured content and as JSON text; a failure as the error document (is_error)."""
        try:
            document = fn(*args, **kwargs)
        except Exception as exc:  # every failure becomes the error document, for the model to read
            text = json.dumps(error_document(exc), ensure_ascii=False, default=str)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        text = json.dumps(document, ensure_ascii=False, default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))

    @app.tool(title="List senses", annotations=READ)
    def list_senses() -> document("sense-list"):
        """Every sense with its group, triggers, signal count and last signal (time and payload)."""
        return call(tools.list_senses)

    @app.tool(title="Show a sense", annotations=READ)
    def show_sense(sense: Sense, limit: Annotated[int, Field(ge=0, le=SIGNALS_LIMIT, description=(
            f"how many of its newest signals (0 to {SIGNALS_LIMIT})"))] = 20) -> document("sense-show"):
        """One sense: its settings, tables with row counts, and its last `limit` signals (oldest first)."""
        return call(tools.show_sense, sense, limit)

    @app.tool(title="Query a sense's database (read-only SQL)", annotations=READ)
    def query_sense(sense: Sense,
                    sql: Annotated[str, Field(description="one read-only SQL statement, with ? placeholders")],
                    params: Annotated[list[JsonValue] | None, Field(description="values for the ? placeholders")]
                    = None,
                    max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description=(
                        f"at most this many rows (1 to {MAX_ROWS})"))] = 100,
                    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT, description=(
                        f"stop the query after this many seconds (at most {MAX_TIMEOUT:g})"))] = 2.0,
                    ) -> document("sense-query"):
        """One read-only SQL statement (SELECT, WITH, read-only PRAGMA table_info...) on a sense's SQLite
        database, with ? parameters. Writes are refused before they run. At most max_rows rows (≤ 1000) and
        16 MiB of values (`truncated_by` says which bound stopped it), no single value over 16 MiB, and
        timeout_s seconds (≤ 10). Signals are in `_signals`
        (id, ts unix ms, payload JSON); `signals_view` adds ISO time."""
        return call(tools.query_sense, sense, sql, params, max_rows, timeout_s)

    @app.tool(title="Read the engine's log", annotations=READ)
    def query_logs(source: Annotated[Literal["reflex", "workflow", "system", "signal"] | None, Field(
                       description="reflex: computes; workflow: threads; system: engine, workers, errors; "
                                   "signal: external events")] = None,
                   type: Annotated[str | None, Field(description="a row type, e.g. error, run_complete")] = None,
                   ref: Annotated[str | None, Field(description="a sense name or a thread id like run-7")] = None,
                   since: Annotated[str | None, Field(description="a duration ago (1h30m, 7d), a date or ISO time")]
                   = None,
                   limit: Annotated[int, Field(ge=1, le=LOGS_LIMIT, description=(
                       f"at most this many rows, the newest (1 to {LOGS_LIMIT})"))] = 50) -> document("log-list"):
        """The engine's log, newest last: filter by source, type (e.g. error, run_complete), ref (a sense
        name or a thread id like run-7) and since (1h, 7d or a UTC date); at most limit rows (≤ 1000)."""
        return call(tools.query_logs, source, type, ref, since, limit)

    @app.tool(title="List workflow threads", annotations=READ)
    def list_threads(status: Annotated[Literal["queued", "started", "waiting", "completed", "failed", "crashed",
                                               "dropped"] | None, Field(
                         description="only threads in this status; waiting: those asking a person")] = None,
                     workflow: Annotated[str | None, Field(description="only threads of this workflow")] = None,
                     limit: Annotated[int, Field(ge=1, le=THREADS_LIMIT, description=(
                         f"at most this many, newest first (1 to {THREADS_LIMIT})"))] = 20) -> document("thread-list"):
        """Workflow threads, newest first. status="waiting": threads waiting for a person (reason: the question)."""
        return call(tools.list_threads, status, workflow, limit)

    @app.tool(title="Show a thread", annotations=READ)
    def show_thread(run_id: RunId) -> document("thread-show"):
        """One thread (run-7): status, prompt, timings, why it ended, its events and every message with meta."""
        return call(tools.show_thread, run_id)

    @app.tool(title="Engine status", annotations=READ)
    def engine_status() -> document("status"):
        """The running engine: workers, each sense's state and schedule, workflows (needs `nerve run`)."""
        return call(tools.status)

    @app.tool(title="Send an event", annotations=ACT)
    def emit(channel: Annotated[str, Field(description="the channel: a name in a reflex's on: list")],
             payload: Annotated[JsonValue, Field(description="any JSON value, at most 16 MiB - 64 KiB")] = None,
             key: Annotated[str | None, Field(description="an idempotency key: a resend with it is a no-op")] = None,
             ) -> document("emit"):
        """Send an event to an external channel (a name in a reflex's on: list) with a JSON payload: it is
        committed before the answer and its listeners compute (delivered at the next start if no engine runs).
        A key makes a resend of the same event a no-op."""
        return call(tools.emit, channel, payload, key)

    @app.tool(title="Compute a sense now", annotations=ACT)
    def compute_sense(sense: Sense) -> document("sense-compute"):
        """Run one compute of a sense now, in the engine's worker; returns its outcome and payload."""
        return call(tools.compute_sense, sense)

    @app.tool(title="Start a workflow thread", annotations=ACT)
    def start_thread(workflow: Annotated[str, Field(description="the workflow's name (workflows: in nerve.yaml)")],
                     prompt: Annotated[str, Field(description="the thread's first message")],
                     ctx: Context,
                     max_rounds: Annotated[int | None, Field(ge=1, description=(
                         "at most this many rounds (capped by engine.max_rounds); default: the engine's"))] = None,
                     ) -> document("thread-start"):
        """Start a thread of a workflow with a prompt; returns its run id (follow it with show_thread)."""
        return call(tools.start_thread, workflow, prompt, max_rounds, client_name(ctx))

    @app.tool(title="Approve a waiting thread", annotations=ACT)
    def approve_thread(run_id: RunId, ctx: Context, note: Note = None) -> document("thread-answer"):
        """Approve a thread waiting for a person; the note is the next message its moderator sees."""
        return call(tools.answer_thread, run_id, "approve", note, client_name(ctx))

    @app.tool(title="Reject a waiting thread", annotations=ACT)
    def reject_thread(run_id: RunId, ctx: Context, note: Note = None) -> document("thread-answer"):
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
