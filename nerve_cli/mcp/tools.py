"""What each `nerve mcp` tool does, without the MCP SDK: plain functions over one instance folder.

Each returns the document the matching CLI command prints with --json (an
object; lists are wrapped under a key), so an agent reading MCP and a script
reading the CLI see the same shapes. Reads go to the files (SQLite read-only,
while an engine writes); computing, emitting and starting threads go through
the running engine's control socket, and say so plainly when none runs. User
code is never imported here: a compute runs in the engine's workers.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.config.check import check_instance
from nerve_cli.config.lifecycle import bring_back, disable_sense, enable_sense
from nerve_cli.config.projection import BindError
from nerve_cli.contract import VERSION
from nerve_cli.contract import engine as engine_docs
from nerve_cli.contract import errors as error_docs
from nerve_cli.contract import senses as sense_docs
from nerve_cli.contract import threads as thread_docs
from nerve_cli.contract.instance import config_check
from nerve_cli.contract.logs import log_row
from nerve_cli.contract.times import parse_instant
from nerve_cli.errors import EngineNotRunning, ErrorType, NerveError, UsageError
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.mcp import authoring
from nerve_cli.ops.client import engine_running, request
from nerve_cli.ops.emit import emit_event
from nerve_cli.ops.senses.dryrun import dry_run
from nerve_cli.ops.senses.inspect import code_stamp, list_senses, load_problem, require_sense, show_sense
from nerve_cli.ops.senses.pause import pause_senses
from nerve_cli.ops.senses.read import read_sense
from nerve_cli.ops.senses.scaffold import new_sense
from nerve_cli.ops.senses.standalone import compute_via_engine
from nerve_cli.ops.workflows.control import cancel_thread, pause_thread, rerun_thread
from nerve_cli.ops.workflows.gates import answer_thread
from nerve_cli.ops.workflows.threads import list_threads, thread_detail
from nerve_cli.schema.instance import migrate_senses
from nerve_cli.store.history import read_logs
from nerve_cli.store.logs import now_ms
from nerve_cli.store.querychild import QueryChildren

LOGS_LIMIT, SIGNALS_LIMIT, THREADS_LIMIT = 1000, 500, 500


class BadArgument(UsageError):
    """An argument the CLI's option parsing would refuse: the same `usage` error, exit code 2."""

    type = ErrorType.USAGE


class Tools:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.layout = Layout(self.home)
        self._checked: dict[str, tuple[Any, dict[str, Any] | None]] = {}  # sense → (code_stamp, load problem)
        self._queries = QueryChildren()  # a query runs in a child killed at its deadline (one step can outrun it)

    # -- reading the files ---------------------------------------------------------
    def list_senses(self) -> dict[str, Any]:
        """`nerve sense list --json`: each sense with its group, triggers, signal count and last signal."""
        return sense_docs.sense_list(list_senses(self.home))

    def show_sense(self, sense: str, limit: int = 20, bind: dict[str, Any] | None = None) -> dict[str, Any]:
        """`nerve sense show NAME -n LIMIT --json`: config, tables with row counts, the last signals (a lazy
        sense brought up to date first, for `bind`'s parameter values)."""
        reading = self._read(sense, bind)
        detail = show_sense(self.home, sense, max(0, min(limit, SIGNALS_LIMIT)), check_code=False)
        return sense_docs.sense_show(replace(detail, problem=self._load_problem(sense)), reading)

    def _read(self, sense: str, bind: dict[str, Any] | None) -> Any:
        """Bring a lazy sense up to date (through the engine, or in a one-off worker) before reading it."""
        try:
            return read_sense(self.home, sense, bind)
        except BindError as exc:
            raise BadArgument(str(exc)) from None

    def _load_problem(self, sense: str) -> dict[str, Any] | None:
        """The code check `nerve sense show` runs (a child importing the sense, ≈ 0.2 s), run again only
        when a file of the sense changed: an agent reading a sense over and over pays for it once."""
        stamp = code_stamp(self.home, sense)
        known = self._checked.get(sense)
        if known is None or known[0] != stamp:
            known = self._checked[sense] = (stamp, load_problem(self.home, sense))
        return known[1]

    def query_sense(self, sense: str, sql: str, params: list[Any] | None = None, max_rows: int = 100,
                    timeout_s: float = 2.0, bind: dict[str, Any] | None = None) -> dict[str, Any]:
        """One read-only SQL statement on the sense's database (writes are refused by SQLite before they run);
        a lazy sense is brought up to date first (for `bind`'s parameter values)."""
        require_sense(self.home, sense)
        reading = self._read(sense, bind)
        result = self._queries.run(self.layout.sense_db(sense), sql, params, max_rows=max_rows, timeout=timeout_s)
        return {"version": VERSION, "sense": sense, **result.to_json(), "read": sense_docs.read(reading)}

    def query_logs(self, source: str | None = None, type: str | None = None, ref: str | None = None,
                   since: str | None = None, limit: int = 50) -> dict[str, Any]:
        """`nerve logs --json` lines, as one list: the engine's log rows, newest last (archived days too)."""
        try:
            since_ms = parse_instant(since, now_ms=now_ms(), utc=True) if since else None
        except ValueError as exc:
            raise BadArgument(f"Invalid value for since: {exc}") from None
        history = read_logs(self.home, source=source, type=type, ref=ref, since_ms=since_ms,
                            limit=max(1, min(limit, LOGS_LIMIT)))
        return {"version": VERSION, "logs": [log_row(r) for r in history.rows]}

    def list_threads(self, status: str | None = None, workflow: str | None = None, limit: int = 20) -> dict[str, Any]:
        """`nerve thread list --json`: threads newest first; status `waiting` is the inbox of threads asking a person."""
        return thread_docs.thread_list(list_threads(self.layout.logs_db, status=status, workflow=workflow,
                                        limit=max(1, min(limit, THREADS_LIMIT))))

    def show_thread(self, run_id: str) -> dict[str, Any]:
        """`nerve thread show run-N --json`: status, prompt, timings, events and every message."""
        return thread_docs.thread_show(thread_detail(self.layout.logs_db, run_id))

    # -- through the running engine ------------------------------------------------
    def status(self) -> dict[str, Any]:
        """`nerve status --json`: the running engine's workers, senses and workflows."""
        return engine_docs.status(self._engine("status"))

    def emit(self, channel: str, payload: Any = None, key: str | None = None, schema_version: str | None = None,
             hash: bool = False) -> dict[str, Any]:
        """`nerve emit CHANNEL --json`: an event, committed before the answer; its listeners compute
        (with no engine running it is stored and delivered at the next start)."""
        return emit_event(self.home, channel, payload, key, schema_version, hash).to_json()

    def compute_sense(self, sense: str) -> dict[str, Any]:
        """`nerve sense compute NAME --json`, through the engine: one compute now, its outcome and payload."""
        self._require_engine("compute a sense")
        return engine_docs.compute(compute_via_engine(self.home, sense))

    def start_thread(self, workflow: str, prompt: str, max_rounds: int | None = None,
                     client: str | None = None) -> dict[str, Any]:
        """Start a workflow thread; answers its run id and whether it started or queued. Its origin says it
        came through `nerve mcp`, for whom (`person`) and from which MCP client."""
        origin = {"kind": "mcp", "by": person(self.home), "via": _via(client)}
        answer = self._engine("start_thread", workflow=workflow, prompt=prompt, max_rounds=max_rounds, origin=origin)
        return {"version": VERSION, "run_id": answer["run_id"], "status": answer["status"]}

    def answer_thread(self, run_id: str, decision: str, note: str | None = None, client: str | None = None,
                      answer: Any = None, question: str | None = None) -> dict[str, Any]:
        """`nerve thread approve|reject run-N [--question ID] [--answer JSON] --json`: through the engine, or
        written for the next start. A null `answer` is no structured answer; a null `question` answers every
        open question."""
        data = NO_ANSWER if answer is None else answer
        return thread_docs.answer(answer_thread(self.home, run_id, decision, note, via=_via(client), data=data,
                                                question=question))

    def pause_thread(self, run_id: str, resume: bool = False, client: str | None = None) -> dict[str, Any]:
        """`nerve thread pause|resume run-N --json`: through the engine, or written to the log with none running."""
        return thread_docs.paused(pause_thread(self.home, run_id, via=_via(client), resume=resume))

    def cancel_thread(self, run_id: str, reason: str | None = None, client: str | None = None) -> dict[str, Any]:
        """`nerve thread cancel run-N --json`: through the engine, or written to the log with none running."""
        return thread_docs.cancelled(cancel_thread(self.home, run_id, reason, via=_via(client)))

    def rerun_thread(self, run_id: str, from_round: int | None = None, message: str | None = None,
                     client: str | None = None) -> dict[str, Any]:
        """`nerve thread rerun run-N [--from-round K] [--message TEXT] --json`: a new thread from an old one."""
        return thread_docs.rerun(rerun_thread(self.home, run_id, from_round, message, via=_via(client)))

    # -- authoring: scaffold, write, migrate, check, try, switch on (confined to the instance) --------------
    def new_sense(self, name: str, recipe: str | None = None, on: list[str] | None = None, group: str = "default",
                  enabled: bool = False) -> dict[str, Any]:
        """`nerve sense new NAME [--from RECIPE] [--on A,B] [--disabled] --json`."""
        made = new_sense(self.home, name, group, recipe=recipe, on=tuple(on or ()), enabled=enabled)
        return sense_docs.sense_new(self.home, made)

    def write_sense_file(self, sense: str, file: str, text: str) -> dict[str, Any]:
        """Write senses/SENSE/{sense.py,schema.py} whole and commit it; nothing else can be written."""
        return authoring.write_sense_file(self.home, sense, file, text)

    def migrate_sense(self, sense: str, allow_data_loss: bool = False) -> dict[str, Any]:
        """`nerve sense migrate SENSE [--allow-data-loss] --json`."""
        results, sha = migrate_senses(self.home, [sense], allow_data_loss=allow_data_loss)
        return sense_docs.migrate(self.home, results, sha)

    def check_config(self, code: bool = True) -> dict[str, Any]:
        """`nerve config check --json` (`code=False`: `--fast`, without importing the senses in a child)."""
        return config_check(check_instance(self.home, code=code))

    def dry_run_sense(self, sense: str, events: list[dict[str, Any]] | None = None,
                      bind: dict[str, Any] | None = None) -> dict[str, Any]:
        """`nerve sense compute SENSE --dry-run [--event SOURCE=JSON ...] [--bind NAME=VALUE ...] --json`."""
        samples = None if events is None else [(str(e["source"]), e.get("payload")) for e in events]
        try:
            return dry_run(self.home, sense, samples, bind=bind).to_json()
        except BindError as exc:
            raise BadArgument(str(exc)) from None

    def schema_text(self, sense: str) -> str:
        """A sense's schema.py as written (for the nerve://sense/NAME/schema.py resource)."""
        require_sense(self.home, sense)
        path = self.layout.sense_dir(sense) / "schema.py"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def pause_sense(self, senses: list[str], group: str | None, resume: bool,
                    client: str | None = None) -> dict[str, Any]:
        """`nerve sense pause|resume NAME...|--group G --json`: through the engine, or kept for the next one."""
        if bool(senses) == (group is not None):
            raise UsageError("pause_sense / resume_sense: give senses or a group, not both")
        return sense_docs.paused(pause_senses(self.home, senses, group, _via(client), resume=resume))

    def set_sense_enabled(self, sense: str, enabled: bool) -> dict[str, Any]:
        """`nerve sense enable|disable SENSE --json` (a running engine picks the change up by itself)."""
        outcome = enable_sense(self.home, sense) if enabled else disable_sense(self.home, sense)
        return sense_docs.lifecycle(outcome, bring_back)

    def _engine(self, op: str, **args: Any) -> dict[str, Any]:
        self._require_engine(op.replace("_", " "))
        answer = request(self.home, op, **args)
        answer.pop("ok", None)
        return answer

    def _require_engine(self, what: str) -> None:
        if not engine_running(self.home):
            raise EngineNotRunning(f"no engine is running for {self.home}, and it takes one to {what}: "
                                   "start it with `nerve run` (reading senses, logs and threads works without)")


def _via(client: str | None) -> str:
    """`nerve mcp`, with the MCP client that asked (its initialize clientInfo), when it said."""
    return f"nerve mcp (client {client[:80]})" if client else "nerve mcp"


def error_document(exc: BaseException) -> dict[str, Any]:
    """A failure as the CLI's --json error document: `{"version", "error": {"type", "message", "exit_code", ...}}`."""
    if isinstance(exc, NerveError):
        return error_docs.from_nerve_error(exc)
    if isinstance(exc, sqlite3.Error):
        return error_docs.error(ErrorType.DATABASE_ERROR, str(exc), 1)
    return error_docs.internal(exc)
