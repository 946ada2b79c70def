"""The MCP server: Nerve's tools over stdio with the official SDK (`mcp` 2.x, `MCPServer`).

Register it with a client as a stdio server running `nerve mcp --home PATH`
(docs/guides/mcp.md). Each tool returns a JSON object (structured
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
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, Resource, TextContent, ToolAnnotations
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from nerve_cli import __version__
from nerve_cli.contract import errors as error_docs
from nerve_cli.contract.schema import schema
from nerve_cli.errors import ErrorType, NerveError, UnknownSense, UnknownThread
from nerve_cli.mcp import prompts
from nerve_cli.mcp.agents import register as register_agents
from nerve_cli.mcp.authoring import MAX_TEXT
from nerve_cli.mcp.kept import Answers
from nerve_cli.mcp.live import Subscriptions
from nerve_cli.mcp.resources import SCHEMA, SENSE, SENSES, THREAD, WAITING, sense_uri, thread_uri
from nerve_cli.mcp.tools import LOGS_LIMIT, SIGNALS_LIMIT, THREADS_LIMIT, Tools, error_document
from nerve_cli.mcp.transport import stdio_transport
from nerve_cli.ops.senses.dryrun import MAX_SAMPLES
from nerve_cli.store.readquery import MAX_ROWS, MAX_TIMEOUT

INSTRUCTIONS = """Nerve is a local observation engine: senses (small Python functions with their own SQLite
database) observe the world on schedules or on signals, and workflows run multi-role threads. Start with
list_senses (each with its last signal), then show_sense or query_sense (read-only SQL on one sense's
database; see its tables with show_sense or `SELECT name, sql FROM sqlite_master`). query_logs reads the
engine's log. emit sends an event to a channel (stored for the next start when no engine runs);
compute_sense and start_thread need the engine running (`nerve run`). Threads waiting
for a person or an event are listed by list_threads(status="waiting"); approve_thread / reject_thread
answer a person's question (with a structured answer when it declares a JSON Schema); cancel_thread
ends a thread, rerun_thread runs one again (from a round, with an edited message); pause_thread and
resume_thread hold a thread (no round starts, no slot held) and let it go on; pause_sense and resume_sense
stop a sense's computes while its events accumulate.
To write a sense: new_sense (scaffolded, migrated, registered off), write_sense_file (its sense.py and
schema.py), migrate_sense after a schema change, check_config, dry_run_sense with sample events (nothing is
kept), then enable_sense. Resources (subscribe to be told of changes): nerve://senses, nerve://sense/NAME
(its tables and latest signal), nerve://sense/NAME/schema.py, nerve://threads/waiting, nerve://thread/RUN.
Prompts: write_sense, triage_waiting_threads, why_is_it_quiet. A coding agent with an inbox (agents: in
nerve.yaml) takes its events with wait_for_events and acknowledges each delivery with ack_events."""



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
                                                                           "boolean", "null")]}),
                      AfterValidator(lambda value: _finite(value))]


def _finite(value: Any) -> Any:
    """A JSON value as JSON can hold it: the client's parser may read NaN, Infinity or 1e400 (as inf), which
    would be stored as null; they are refused, as the CLI and the control socket refuse them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item} is not a JSON number (NaN, Infinity and numbers past about 1.8e308 have none)")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value
Sense = Annotated[str, Field(description="the sense's name (senses: in nerve.yaml; list_senses lists them)")]
Bind = Annotated[dict[str, str | int | float | bool] | None, Field(description=(
    "a lazy sense's parameter values, for one whose bindings take parameters, e.g. {\"repo\": \"me/app\"}"))]
RunId = Annotated[str, Field(description="a thread's id, like run-7 (list_threads lists them)")]
SenseNames = Annotated[list[str] | None, Field(description="the senses, by name (or give group)")]
GroupName = Annotated[str | None, Field(description="every sense of this group (or give senses)")]
Note = Annotated[str | None, Field(description="the answer the thread's moderator sees next (default: approved "
                                               "or rejected)")]
StructuredAnswer = Annotated[JsonValue, Field(description="a structured answer (any JSON value but null), checked "
                                                          "against the JSON Schema the question declared (show_thread: "
                                                          "waiting_for.schema)")]
QuestionId = Annotated[str | None, Field(description="the id of the one question to answer (show_thread: "
                                                     "waiting_for.questions[].id); default: every open question",
                                         max_length=40)]
Reason = Annotated[str | None, Field(description="why it is cancelled: kept as the thread's reason", max_length=2000)]
FromRound = Annotated[int | None, Field(description="start from the old thread's messages up to this round (0: its "
                                                    "prompt alone)", ge=0, le=100000)]
EditedMessage = Annotated[str | None, Field(description="with from_round: the new content of the last message kept "
                                                        "(that round's, or the prompt for 0)")]

# Every tool says all four hints (a client decides from them whether to ask its user before a call)
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
SETTLE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)  # the same call again changes nothing more
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


class NerveServer(MCPServer):
    """MCPServer whose refusal of a tool's arguments (a wrong type, a value not among the choices) is the
    `usage` error document, exit code 2, as the CLI's refusal of a bad option is, not the SDK's own text;
    served over stdio by `transport`, which answers the malformed requests the SDK would drop."""

    prefix: list[str] | None = None  # the lines `front` read before handing the session over
    answers: Any = None  # where the SDK's answers to initialize and tools/list are kept (kept.Answers)

    async def run_stdio_async(self) -> None:
        async with stdio_transport(self.prefix, self.answers) as (read_stream, write_stream):
            # as MCPServer.run_stdio_async, with this transport
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    concrete: Any = None  # () -> the resources of this instance now (each sense, each waiting thread)

    async def list_resources(self) -> list[Resource]:
        """The fixed resources, then one per sense and per waiting thread (their templates are listed too)."""
        found = await super().list_resources()
        return found + (self.concrete() if self.concrete is not None else [])

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


class SampleEvent(BaseModel):
    """An event to try a sense with: its source (a channel, a sense or a paths: pattern) and its JSON payload."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="a channel, a sense or a paths: pattern the sense listens to")
    payload: JsonValue = Field(default=None, description="the event's JSON payload")


def build(home: Path) -> NerveServer:
    tools = Tools(home)
    live = Subscriptions(home)
    app = NerveServer("nerve", title="Nerve", version=__version__, instructions=INSTRUCTIONS,
                      lifespan=live.lifespan, subscriptions=live.bus)
    live.attach(app)

    def failed(exc: Exception) -> CallToolResult:
        text = json.dumps(error_document(exc), ensure_ascii=False, default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def call(fn: Any, *args: Any, **kwargs: Any) -> CallToolResult:
        """The document as structured content and as JSON text; a failure as the error document (is_error)."""
        try:
            document = fn(*args, **kwargs)
        except Exception as exc:  # every failure becomes the error document, for the model to read
            return failed(exc)
        text = json.dumps(document, ensure_ascii=False, default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))

    @app.tool(title="List senses", annotations=READ)
    def list_senses() -> document("sense-list"):
        """Every sense with its group, triggers, signal count and last signal (time and payload)."""
        return call(tools.list_senses)

    @app.tool(title="Show a sense", annotations=READ)
    def show_sense(sense: Sense, limit: Annotated[int, Field(ge=0, le=SIGNALS_LIMIT, description=(
            f"how many of its newest signals (0 to {SIGNALS_LIMIT})"))] = 20,
                   bind: Bind = None) -> document("sense-show"):
        """One sense: its settings, tables with row counts, and its last `limit` signals (oldest first). A lazy
        sense is brought up to date first; one whose bindings take parameters is read for `bind`'s values
        (e.g. {"repo": "me/app"}), and `read.value` is that projection's value."""
        return call(tools.show_sense, sense, limit, bind)

    @app.tool(title="Query a sense's database (read-only SQL)", annotations=READ)
    def query_sense(sense: Sense,
                    sql: Annotated[str, Field(description="one read-only SQL statement, with ? placeholders")],
                    params: Annotated[list[JsonValue] | None, Field(description="values for the ? placeholders")]
                    = None,
                    max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description=(
                        f"at most this many rows (1 to {MAX_ROWS})"))] = 100,
                    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT, description=(
                        f"stop the query after this many seconds (at most {MAX_TIMEOUT:g})"))] = 2.0,
                    bind: Bind = None,
                    ) -> document("sense-query"):
        """One read-only SQL statement (SELECT, WITH, read-only PRAGMA table_info...) on a sense's SQLite
        database, with ? parameters. Writes are refused before they run. At most max_rows rows (≤ 1000) and
        16 MiB of values (`truncated_by` says which bound stopped it), no single value over 16 MiB, and
        timeout_s seconds (≤ 10). Signals are in `_signals`
        (id, ts unix ms, payload JSON); `signals_view` adds ISO time. A lazy sense is brought up to date
        first (for `bind`'s parameter values when its bindings take parameters)."""
        return call(tools.query_sense, sense, sql, params, max_rows, timeout_s, bind)

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
                                               "dropped", "cancelled", "paused"] | None, Field(
                         description="only threads in this status; waiting: those asking a person or waiting for "
                                     "an event")] = None,
                     workflow: Annotated[str | None, Field(description="only threads of this workflow")] = None,
                     limit: Annotated[int, Field(ge=1, le=THREADS_LIMIT, description=(
                         f"at most this many, newest first (1 to {THREADS_LIMIT})"))] = 20) -> document("thread-list"):
        """Workflow threads, newest first. status="waiting": threads waiting for a person (reason: the question)
        or for an event (reason: what event)."""
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
             schema_version: Annotated[str | None, Field(description=(
                 "the payload's schema version, e.g. 1 or v1.0 (at most 64 characters, no spaces)"))] = None,
             hash: Annotated[bool, Field(description="store the payload's content hash (sha256 of canonical JSON)")]
             = False,
             ) -> document("emit"):
        """Send an event to an external channel (a name in a reflex's on: list) with a JSON payload: it is
        committed before the answer and its listeners compute (delivered at the next start if no engine runs).
        A key makes a resend of the same event a no-op. schema_version (e.g. "1" or "v1.0") says which
        schema the payload follows; hash=true stores the payload's content hash (sha256 of canonical JSON)."""
        return call(tools.emit, channel, payload, key, schema_version, hash)

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
    def approve_thread(run_id: RunId, ctx: Context, note: Note = None, answer: StructuredAnswer = None,
                       question: QuestionId = None) -> document("thread-answer"):
        """Approve a thread waiting for a person; the note (and the structured answer, when its question declares
        a JSON Schema: see show_thread's waiting_for.schema) is the next message its moderator sees. A round
        asking several questions (show_thread's waiting_for.questions) resumes once every one is settled."""
        return call(tools.answer_thread, run_id, "approve", note, client_name(ctx), answer, question)

    @app.tool(title="Reject a waiting thread", annotations=ACT)
    def reject_thread(run_id: RunId, ctx: Context, note: Note = None, answer: StructuredAnswer = None,
                      question: QuestionId = None) -> document("thread-answer"):
        """Reject a thread waiting for a person; it resumes and its moderator decides what follows."""
        return call(tools.answer_thread, run_id, "reject", note, client_name(ctx), answer, question)

    @app.tool(title="Cancel a thread", annotations=DESTROY)
    def cancel_thread(run_id: RunId, ctx: Context, reason: Reason = None) -> document("thread-cancel"):
        """Cancel a queued, running or waiting thread: it ends `cancelled` (a running one once its role stops,
        within its workflow's cancel_grace). An ended thread cannot be cancelled: the error names its status."""
        return call(tools.cancel_thread, run_id, reason, client_name(ctx))

    @app.tool(title="Pause a thread", annotations=ACT)
    def pause_thread(run_id: RunId, ctx: Context) -> document("thread-pause"):
        """Pause a queued, running or waiting thread: no round starts and it holds no slot until resume_thread
        (a running one once its running round ends: status pausing). It stays paused across engine restarts;
        an event its wait matches meanwhile resumes it only after resume_thread."""
        return call(tools.pause_thread, run_id, False, client_name(ctx))

    @app.tool(title="Resume a paused thread", annotations=ACT)
    def resume_thread(run_id: RunId, ctx: Context) -> document("thread-pause"):
        """Resume a paused thread: it goes on from its last round (started or queued), or waits again for what
        its last round asked."""
        return call(tools.pause_thread, run_id, True, client_name(ctx))

    @app.tool(title="Run a thread again", annotations=ACT)
    def rerun_thread(run_id: RunId, ctx: Context, from_round: FromRound = None,
                     message: EditedMessage = None) -> document("thread-rerun"):
        """Run a thread again as a new thread (same workflow, prompt and limits); with from_round, starting from
        its messages up to that round, the last one replaced by message when given. Returns the new run id."""
        return call(tools.rerun_thread, run_id, from_round, message, client_name(ctx))

    # -- authoring --------------------------------------------------------------------------------------
    @app.tool(title="Scaffold a new sense", annotations=ACT)
    def new_sense(name: Annotated[str, Field(description="the new sense's name (lowercase, digits, - and _)")],
                  recipe: Annotated[Literal["projection", "reaction", "wait-all", "merge", "switch", "heartbeat", "agent-hooks"]
                                    | None, Field(description="start from this recipe (on: its sources); "
                                                              "default: the plain template")] = None,
                  on: Annotated[list[str] | None, Field(description=(
                      "the senses or channels it listens to (a recipe's sources)"))] = None,
                  group: Annotated[str, Field(description="the worker group it runs in")] = "default",
                  enabled: Annotated[bool, Field(description=(
                      "register it on at once (default off: try it with dry_run_sense first)"))] = False,
                  ) -> document("sense-new"):
        """Scaffold a sense in senses/NAME/ (from the template, or a recipe on the `on` sources), generate its
        first migration, register it in nerve.yaml (off unless enabled=true: try it first) and commit."""
        return call(tools.new_sense, name, recipe, on, group, enabled)

    @app.tool(title="Write a sense's code or schema", annotations=SETTLE)
    def write_sense_file(sense: Sense,
                         file: Annotated[Literal["sense.py", "schema.py"], Field(description=(
                             "sense.py: its compute; schema.py: its tables"))],
                         text: Annotated[str, Field(max_length=MAX_TEXT, description=(
                             f"the file's whole new text (at most {MAX_TEXT:,} bytes as UTF-8)"))],
                         ) -> document("sense-file"):
        """Write a sense's sense.py (def compute(db, peers[, trigger])) or schema.py (@table classes) whole, at
        most 1 MiB, and commit it. After changing schema.py, run migrate_sense."""
        return call(tools.write_sense_file, sense, file, text)

    @app.tool(title="Migrate a sense's database",
              annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                          open_world_hint=False))  # it may drop a table; again, it writes nothing
    def migrate_sense(sense: Sense,
                      allow_data_loss: Annotated[bool, Field(description=(
                          "accept a migration that drops tables or columns (their rows are lost)"))] = False,
                      ) -> document("migrate"):
        """Generate the next SQL migration from the sense's schema.py (nothing when nothing changed) and commit it.
        A change that drops tables or columns is refused unless allow_data_loss (say why: rows are lost)."""
        return call(tools.migrate_sense, sense, allow_data_loss)

    @app.tool(title="Check the configuration", annotations=READ)
    def check_config(code: Annotated[bool, Field(description=(
            "also import each enabled sense and workflow in a child process"))] = True) -> document("config-check"):
        """Validate nerve.yaml and the folder, and (code=true) import each enabled sense and workflow in a child
        process: every problem with its file, line and the fix."""
        return call(tools.check_config, code)

    @app.tool(title="Try a sense without keeping anything", annotations=READ)
    def dry_run_sense(sense: Sense,
                      events: Annotated[list[SampleEvent] | None, Field(max_length=MAX_SAMPLES, description=(
                          "sample events to compute with, instead of the ones waiting for it "
                          f"(at most {MAX_SAMPLES:,})"))] = None,
                      bind: Bind = None,
                      ) -> document("sense-dry-run"):
        """Run one compute of the sense on its real database and roll everything back: the signal it would send,
        the rows it would write per table, its cursor moves and prints, or its error with file:line. `events`
        replace the events waiting for it; `bind`: a sense whose bindings take parameters rehearses for those
        values. Nothing is kept or logged."""
        samples = None if events is None else [e.model_dump() for e in events]
        return call(tools.dry_run_sense, sense, samples, bind)

    @app.tool(title="Turn a sense on", annotations=SETTLE)
    def enable_sense(sense: Sense) -> document("lifecycle"):
        """Turn a sense on in nerve.yaml (and commit); a running engine starts it."""
        return call(tools.set_sense_enabled, sense, True)

    @app.tool(title="Turn a sense off", annotations=SETTLE)
    def disable_sense(sense: Sense) -> document("lifecycle"):
        """Turn a sense off, with the reflexes and readers that depend on it (nothing is deleted); commit."""
        return call(tools.set_sense_enabled, sense, False)

    @app.tool(title="Pause senses", annotations=ACT)
    def pause_sense(ctx: Context, senses: SenseNames = None, group: GroupName = None) -> document("sense-pause"):
        """Pause senses, named or a whole group: no compute starts and their events wait (across restarts) until
        resume_sense; unlike disable_sense nothing cascades and nerve.yaml is not edited."""
        return call(tools.pause_sense, senses or [], group, False, client_name(ctx))

    @app.tool(title="Resume paused senses", annotations=ACT)
    def resume_sense(ctx: Context, senses: SenseNames = None, group: GroupName = None) -> document("sense-pause"):
        """Resume paused senses: each computes once for whatever waited, then as before."""
        return call(tools.pause_sense, senses or [], group, True, client_name(ctx))

    register_agents(app, home, document, call, ACT, failed)
    _resources(app, tools)
    app.concrete = lambda: _concrete(tools)
    _prompts(app, tools)
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
def _json_text(fn: Any, *args: Any) -> str:
    """A resource's content: the document as JSON. A sense or thread that does not exist is the protocol's "not
    found" error (the SDK's ResourceNotFoundError: -32602 with the URI, as the 2026-07-28 revision asks; it
    retired the -32002 of earlier ones), any other failure a resource error with the message (never an error
    document passed off as the resource's content)."""
    return json.dumps(_read(fn, *args), ensure_ascii=False, default=str)


def _read(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except (UnknownSense, UnknownThread) as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except NerveError as exc:
        raise ResourceError(f"{exc.type.value}: {exc}") from None


def _resources(app: MCPServer, tools: Tools) -> None:
    @app.resource(SENSES, name="senses", mime_type="application/json")
    def senses() -> str:
        """Every sense with its last signal (the sense-list document)."""
        return _json_text(tools.list_senses)

    @app.resource(SENSE, name="sense", mime_type="application/json")
    def sense(name: str) -> str:
        """One sense: settings, tables, its latest signal (the sense-show document)."""
        return _json_text(tools.show_sense, name, 1)

    @app.resource(SCHEMA, name="sense-schema", mime_type="text/x-python")
    def schema_py(name: str) -> str:
        """A sense's schema.py: its tables as @table classes."""
        return str(_read(tools.schema_text, name))

    @app.resource(WAITING, name="waiting-threads", mime_type="application/json")
    def waiting() -> str:
        """Threads waiting for a person, each with its question (the thread-list document)."""
        return _json_text(tools.list_threads, "waiting", None, 100)

    @app.resource(THREAD, name="thread", mime_type="application/json")
    def thread(run_id: str) -> str:
        """One thread with its messages (the thread-show document)."""
        return _json_text(tools.show_thread, run_id)


def _concrete(tools: Tools) -> list[Resource]:
    try:
        senses = [s["name"] for s in tools.list_senses()["senses"]]
        waiting = [t["run_id"] for t in tools.list_threads("waiting", None, 100)["threads"]]
    except Exception:  # an instance that cannot be read now lists its fixed resources only
        return []
    return ([Resource(uri=sense_uri(n), name=f"sense {n}", mime_type="application/json",
                      description=f"{n}: settings, tables, latest signal") for n in senses]
            + [Resource(uri=thread_uri(r), name=f"thread {r}", mime_type="application/json",
                        description=f"{r}, waiting for a person") for r in waiting])


def _prompts(app: MCPServer, tools: Tools) -> None:
    @app.prompt(name="write_sense")
    def write_sense(goal: str, sources: str | None = None) -> str:
        """Write, try and switch on a new sense that does what you describe."""
        return prompts.write_sense(goal, sources)

    @app.prompt(name="triage_waiting_threads")
    def triage_waiting_threads() -> str:
        """Go through the threads waiting for a person and answer each."""
        return prompts.triage(tools.list_threads("waiting", None, 100))

    @app.prompt(name="why_is_it_quiet")
    def why_is_it_quiet(sense: str) -> str:
        """Find out why a sense stopped signalling (stale, backlog, errors, its code)."""
        return prompts.quiet(sense)


def serve(home: Path) -> None:
    """Serve on stdin/stdout until the client closes them (its answers to initialize and tools/list are kept:
    the next start gives them before loading the SDK, `front`)."""
    app = build(home)
    app.answers = Answers.here()
    app.answers.load()
    app.run()


def serve_after(home: Path, prefix: list[str], answers: Answers) -> None:
    """Serve the session `front` began: `prefix` first (its replayed handshake, then what it did not answer)."""
    app = build(home)
    app.prefix, app.answers = prefix, answers
    app.run()
