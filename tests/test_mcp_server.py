"""`nerve mcp` through the SDK's own stdio client (mcp.client.stdio): the server runs as a real `nerve mcp` process."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from contractkit import Checked
from enginekit import RunningEngine, last_signal, nerve, wait_for, write_instance
from loadclock import scaled
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from nerve_cli.contract.schema import MCP_KINDS, schema
from nerve_cli.schema.migrate import generate_migration

pytestmark = pytest.mark.timeout(120)

SCHEMA = textwrap.dedent('''
    from nerve_cli.sdk import table

    @table(pk="n")
    class Tick:
        n: int
        label: str
''')

COUNTER = textwrap.dedent('''
    from .schema import Tick

    def compute(db, peers):
        n = len(db.rows(Tick)) + 1
        db.insert(Tick(n=n, label=f"tick {n}"))
        return {"n": n}
''')

LISTENER = textwrap.dedent('''
    def compute(db, peers):
        return {"heard": True}
''')

GATED = textwrap.dedent('''
    from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

    async def writer(messages):
        return RoleResult(f"draft about {messages[0].content}", {"draft": 1})

    async def critic(messages):
        return ask_person("Ship it?")

    def moderator(messages):
        last = messages[-1]
        if last.role == "__start__":
            return "writer"
        if last.role == "writer":
            answered = any(m.role == PERSON for m in messages)
            return END if "quick" in messages[0].content or answered else "critic"
        if last.role == PERSON and last.meta["approved"]:
            return "writer"
        return END

    workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic}, moderator=moderator)
''')

# each tool → the document it answers (schemas/<kind>.json), advertised as the tool's output schema
TOOLS = {"list_senses": "sense-list", "show_sense": "sense-show", "query_sense": "sense-query",
         "query_logs": "log-list", "list_threads": "thread-list", "show_thread": "thread-show",
         "engine_status": "status", "emit": "emit", "compute_sense": "sense-compute", "start_thread": "thread-start",
         "approve_thread": "thread-answer", "reject_thread": "thread-answer", "cancel_thread": "thread-cancel", "pause_sense": "sense-pause", "resume_sense": "sense-pause", "pause_thread": "thread-pause", "resume_thread": "thread-pause",
         "rerun_thread": "thread-rerun"}
# the tools an agent authors senses with, and their documents (the CLI's --json of the same command)
AUTHORING = {"new_sense": "sense-new", "write_sense_file": "sense-file", "migrate_sense": "migrate",
             "check_config": "config-check", "dry_run_sense": "sense-dry-run", "enable_sense": "lifecycle",
             "disable_sense": "lifecycle"}
TOOLS.update(AUTHORING)
AGENTS = {"wait_for_events": "agent-delivery", "ack_events": "agent-ack"}  # tested in test_agents_mcp.py
TOOLS.update(AGENTS)
CHECKED = Checked()  # every answer of every test, validated as the CLI's --json documents are


def _instance(home: Path) -> None:
    write_instance(home, """
        senses:
          counter: {}
          listener: {}
        reflexes:
          - {sense: counter, interval: 1h}
          - {sense: listener, on: [poke]}
        workflows:
          gated: {concurrency: 1}
    """, {"counter": COUNTER, "listener": LISTENER}, {"counter": SCHEMA})
    assert generate_migration(home / "senses" / "counter") is not None
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "gated.py").write_text(GATED)


def _mcp(home: Path, body: Any, message_handler: Any = None) -> Any:
    """Spawn `nerve mcp --home HOME` and run `body(session)` against it through the SDK's stdio client."""
    env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "nerve_cli", "mcp", "--home", str(home)],
                                   env=env)

    async def main() -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, message_handler=message_handler) as session:
                await session.initialize()
                return await body(session)

    return asyncio.run(main())


async def _call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content  # the same document as text
    document = CHECKED.doc(TOOLS[tool], result.structured_content, f"{tool}({args})")
    if tool == "query_logs":  # each row is the `log` document (`nerve logs --json`'s lines)
        for row in document["logs"]:
            CHECKED.doc("log", row, f"{tool}({args}).logs[]")
    return document


async def _error(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert result.is_error
    document = json.loads(result.content[0].text)
    assert document["version"] == 1 and document["error"]["exit_code"] >= 1
    return document["error"]


def _ticks(home: Path) -> int:
    conn = sqlite3.connect(home / "data" / "senses" / "counter.db")
    try:
        return conn.execute("SELECT count(*) FROM tick").fetchone()[0]
    finally:
        conn.close()


def test_an_agent_reads_queries_emits_starts_and_approves_through_mcp(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: last_signal(home, "counter") == {"n": 1}, 15, what="the counter's first signal")

        async def body(session: ClientSession) -> None:
            listed = await session.list_tools()
            assert {t.name for t in listed.tools} == set(TOOLS)
            assert all(t.description for t in listed.tools)
            for tool in listed.tools:  # the shipped schema of its document, as the tool's output schema
                assert tool.output_schema == schema(TOOLS[tool.name]), tool.name

            senses = {s["name"]: s for s in (await _call(session, "list_senses"))["senses"]}
            assert set(senses) == {"counter", "listener"}
            assert senses["counter"]["last_payload"] == {"n": 1} and senses["counter"]["last_signal_ms"] > 0
            assert senses["counter"]["signal_count"] == 1 and senses["listener"]["last_signal"] is None

            rows = await _call(session, "query_sense", sense="counter",
                               sql="SELECT n, label FROM tick WHERE n >= ?", params=[1])
            assert (rows["columns"], rows["rows"], rows["truncated"]) == (["n", "label"], [[1, "tick 1"]], False)

            for sql in ("DELETE FROM tick", "INSERT INTO tick VALUES (9, 'x')", "DROP TABLE tick",
                        "ATTACH DATABASE '/tmp/x.db' AS x", "PRAGMA journal_mode = DELETE",
                        "SELECT 1; DELETE FROM tick"):
                error = await _error(session, "query_sense", sense="counter", sql=sql)
                assert error["message"].startswith("query refused"), (sql, error)
            assert _ticks(home) == 1  # nothing was written

            emitted = await _call(session, "emit", channel="poke", payload={"by": "agent"})
            assert (emitted["channel"], emitted["triggered"], emitted["delivered"]) == ("poke", ["listener"], "now")
            wait_for(lambda: last_signal(home, "listener") == {"heard": True}, 15, what="the listener's compute")

            computed = await _call(session, "compute_sense", sense="counter")
            assert (computed["outcome"], computed["payload"]) == ("signal", {"n": 2})
            held = await _call(session, "pause_sense", senses=["counter"])
            assert (held["senses"], held["via"]) == ([{"sense": "counter", "status": "paused", "paused": True}],
                                                     "engine")
            assert "counter is paused" in (await _error(session, "compute_sense", sense="counter"))["message"]
            let_go = await _call(session, "resume_sense", senses=["counter"])
            assert let_go["senses"][0]["status"] == "resumed"

            started = await _call(session, "start_thread", workflow="gated", prompt="quick notes")
            run_id = started["run_id"]

            async def thread(status: str) -> dict[str, Any]:
                for _ in range(300):
                    shown = await _call(session, "show_thread", run_id=run_id)
                    if shown["status"] == status:
                        return shown
                    await asyncio.sleep(0.05)
                raise AssertionError(f"{run_id} never became {status}: {shown['status']}")

            shown = await thread("completed")
            assert [m["role"] for m in shown["messages"]] == ["__start__", "writer"]
            assert shown["messages"][1]["content"] == "draft about quick notes"

            gated = (await _call(session, "start_thread", workflow="gated", prompt="release"))["run_id"]
            run_id = gated
            await thread("waiting")
            inbox = (await _call(session, "list_threads", status="waiting"))["threads"]
            assert [(t["run_id"], t["reason"]) for t in inbox] == [(gated, "Ship it?")]
            answer = await _call(session, "approve_thread", run_id=gated, note="ship it")
            assert (answer["decision"], answer["via"]) == ("approve", "engine")
            shown = await thread("completed")
            assert [m["role"] for m in shown["messages"]] == ["__start__", "writer", "critic", "__person__", "writer"]
            assert shown["messages"][3]["content"] == "ship it"
            # who started it and who approved: the person, through nerve mcp and the client it named
            assert shown["origin"] == {"kind": "mcp", "by": getpass.getuser(), "via": "nerve mcp (client mcp 0.1.0)"}
            assert shown["messages"][3]["meta"]["by"] == getpass.getuser()
            assert shown["messages"][3]["meta"]["via"] == "nerve mcp (client mcp 0.1.0)"

            logs = (await _call(session, "query_logs", source="workflow", ref=gated, limit=100))["logs"]
            assert "waiting" in [r["type"] for r in logs]

            run_id = (await _call(session, "start_thread", workflow="gated", prompt="another"))["run_id"]
            await thread("waiting")
            answer = await _call(session, "reject_thread", run_id=run_id, note="not yet")
            assert (answer["decision"], answer["status"]) == ("reject", "started")
            shown = await thread("completed")  # the moderator ends it on a rejection
            assert shown["messages"][-1]["meta"]["approved"] is False

            run_id = (await _call(session, "rerun_thread", run_id=gated, from_round=1, message="edited draft"))["run_id"]
            await thread("waiting")  # the rerun from round 1 asks again
            assert [m["content"] for m in (await _call(session, "show_thread", run_id=run_id))["messages"]][1:3] == [
                "edited draft", "Ship it?"]
            held = await _call(session, "pause_thread", run_id=run_id)
            assert (held["status"], held["was"]) == ("paused", "waiting")
            let_go = await _call(session, "resume_thread", run_id=run_id)
            assert (let_go["status"], let_go["was"]) == ("waiting", "paused")
            cancelled = await _call(session, "cancel_thread", run_id=run_id, reason="not needed")
            assert (cancelled["status"], cancelled["was"]) == ("cancelled", "waiting")
            again = await _error(session, "cancel_thread", run_id=run_id)
            assert f"{run_id} is cancelled: only a queued, running or waiting thread" in again["message"]

            status = await _call(session, "engine_status")
            assert [w["name"] for w in status["workflows"]] == ["gated"]

            # the same documents as the CLI's --json, valid against the shipped schemas
            for tool, args, command, kind in (
                    ("show_thread", {"run_id": gated}, ["thread", "show", gated], "thread-show"),
                    ("list_threads", {}, ["thread", "list"], "thread-list"),
                    ("list_senses", {}, ["sense", "list"], "sense-list"),
                    ("show_sense", {"sense": "counter", "limit": 5}, ["sense", "show", "counter", "-n", "5"],
                     "sense-show")):
                document = await _call(session, tool, **args)
                assert TOOLS[tool] == kind
                cli = nerve(*command, "--json", home=home)
                assert json.loads(cli.stdout) == document, tool

        _mcp(home, body)
        engine.stop()
    used = {kind for tool, kind in TOOLS.items() if tool not in AUTHORING and tool not in AGENTS} \
        | (set(MCP_KINDS) - {"sense-file"})
    assert CHECKED.kinds >= used, used - CHECKED.kinds


def test_without_an_engine_reads_work_and_actions_say_how_to_start_one(home: Path) -> None:
    _instance(home)

    async def body(session: ClientSession) -> None:
        senses = (await _call(session, "list_senses"))["senses"]
        assert [s["name"] for s in senses] == ["counter", "listener"]
        stored = await _call(session, "emit", channel="poke", payload={"by": "agent"})  # kept for the next start
        assert (stored["delivered"], stored["listeners"], stored["triggered"]) == ("at next start", ["listener"], [])
        for tool, args in (("compute_sense", {"sense": "counter"}),
                           ("start_thread", {"workflow": "gated", "prompt": "x"}), ("engine_status", {})):
            error = await _error(session, tool, **args)
            assert error["type"] == "engine_not_running" and "start it with `nerve run`" in error["message"], error
        missing = await _error(session, "query_sense", sense="nosuch", sql="SELECT 1")
        assert "no sense `nosuch`" in missing["message"]
        unknown = await _error(session, "show_thread", run_id="run-9")
        assert "no thread run-9" in unknown["message"]
        choice = await _error(session, "list_threads", status="broken")  # as `nerve thread list --status broken`
        assert (choice["type"], choice["exit_code"]) == ("usage", 2) and "'waiting'" in choice["message"], choice
        typed = await _error(session, "show_sense", sense="counter", limit="many")
        assert typed["type"] == "usage" and typed["message"].startswith("Invalid arguments for show_sense: limit:")
        when = await _error(session, "query_logs", since="yesterday")  # as `nerve logs --since yesterday --json`
        assert (when["type"], when["exit_code"]) == ("usage", 2) and "Invalid value for since" in when["message"]

    _mcp(home, body)


def test_show_sense_checks_the_code_again_only_when_the_sense_changed(home: Path, tmp_path: Path) -> None:
    _instance(home)
    imports = tmp_path / "imports"
    sense_py = home / "senses" / "listener" / "sense.py"
    counted = f"open({str(imports)!r}, 'a').write('x')  # once per import: once per code check\n" + LISTENER
    sense_py.write_text(counted)

    async def body(session: ClientSession) -> None:
        for _ in range(3):
            shown = await _call(session, "show_sense", sense="listener")
            assert shown["load_problem"] is None
        assert imports.read_text() == "x"  # one check for three reads
        sense_py.write_text(counted.replace("def compute(db, peers):", "def compute(db, peers)"))
        broken = (await _call(session, "show_sense", sense="listener"))["load_problem"]
        assert (broken["file"], broken["line"]) == ("senses/listener/sense.py", 3), broken
        cli = json.loads(nerve("sense", "show", "listener", "--json", home=home).stdout)
        assert cli["load_problem"] == broken  # what the CLI says
        sense_py.write_text(counted)
        assert (await _call(session, "show_sense", sense="listener"))["load_problem"] is None

    _mcp(home, body)



class RawClient:
    """`nerve mcp` spoken to line by line, for what the SDK's client cannot send: malformed messages."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
        self.proc = subprocess.Popen([sys.executable, "-m", "nerve_cli", "mcp", "--home", str(home)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert self.answer()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode())
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next message from the server (the test's per-test timeout bounds the wait)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else "server exited"
        return json.loads(line)

    def call(self, request_id: int, tool: str, **args: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        found = self.answer()
        assert found["id"] == request_id, found
        return found["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def test_malformed_requests_are_answered_and_query_sense_bounds_value_size_and_result_bytes(home: Path) -> None:
    _instance(home)
    (home / "data" / "senses").mkdir(parents=True)
    conn = sqlite3.connect(home / "data" / "senses" / "counter.db")
    conn.execute("CREATE TABLE tick (n INTEGER)")
    conn.close()
    client = RawClient(home)
    try:
        malformed = {
            1: json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "list_senses"}).encode(),
            2: b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "emit", '
               b'"arguments": {"channel": "poke", "payload": "\\ud800"}}}',
            3: b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "emit", "arguments": '
               b'{"channel": "poke", "payload": ' + b"[" * 5000 + b"]" * 5000 + b"}}}",
        }
        for request_id, line in malformed.items():
            client.send(line)
            answer = client.answer()
            assert answer["id"] == request_id and answer["error"]["code"] in (-32700, -32600), answer
        client.send(b'{"jsonrpc": "2.0", "id": ')  # no id can be read from it: answered with id null
        assert client.answer()["id"] is None
        client.send(b'{"jsonrpc": "2.0", "method": "notifications/nonsense", "params": "x"}')  # a notification

        rows = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {n}) "
        bomb = client.call(4, "query_sense", sense="counter", timeout_s=10,
                           sql=rows.format(n=20) + "SELECT hex(zeroblob(400000000)) FROM r")
        assert bomb["isError"] and "larger than 16 MiB" in bomb["content"][0]["text"], bomb
        big = client.call(5, "query_sense", sense="counter", sql=rows.format(n=6) + "SELECT hex(zeroblob(2000000)) FROM r")
        document = big["structuredContent"]
        assert (document["row_count"], document["truncated"], document["truncated_by"]) == (4, True, "bytes")
        CHECKED.doc("sense-query", document, "query_sense (bytes)")
        assert client.call(6, "list_senses")["structuredContent"]["senses"]  # still serving

        # one SQLite step that outruns the progress handler: instr over 16 MB ran 8.6 s with timeout_s=1
        started = time.monotonic()
        slow = client.call(7, "query_sense", sense="counter", timeout_s=1,
                           sql="SELECT instr(printf('%.*c', 16000000, 'a'), printf('%.*c', 200000, 'a') || 'b')")
        took = time.monotonic() - started
        assert slow["isError"] and "time limit" in slow["content"][0]["text"], slow
        assert took < scaled(1.0) + 2.0, f"answered after {took:.1f}s"
        assert client.call(8, "query_sense", sense="counter", sql="SELECT 41 + 1")["structuredContent"]["rows"] == [[42]]

        for bad in (9.5, True, {"a": 1}, None):  # ids no JSON-RPC request may have: answered, with id null
            client.send({"jsonrpc": "2.0", "id": bad, "method": "ping"})
            answer = client.answer()
            assert answer["id"] is None and answer["error"]["code"] == -32600, (bad, answer)
        for number in (b"NaN", b"Infinity", b"1e400", b"[1, -1e999]"):  # JSON has no such number: not stored as null
            client.send(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "emit", '
                        b'"arguments": {"channel": "poke", "payload": ' + number + b"}}}")
            refused = client.answer()
            assert refused["id"] == 9 and refused["result"]["isError"], (number, refused)
            assert "not a JSON number" in refused["result"]["content"][0]["text"], refused
        assert not (home / "data" / "events.db").exists() or not sqlite3.connect(home / "data" / "events.db").execute(
            "SELECT count(*) FROM events").fetchone()[0]
    finally:
        client.close()


DOUBLER_SCHEMA = textwrap.dedent('''
    from nerve_cli.sdk import table

    @table(pk="n")
    class Seen:
        n: int
        doubled: int
''')

DOUBLER = textwrap.dedent('''
    from .schema import Seen

    def compute(db, peers, trigger):
        doubled = []
        for event in trigger.events:
            db.upsert(Seen(n=event.payload["n"], doubled=2 * event.payload["n"]))
            doubled.append(2 * event.payload["n"])
        print(f"doubled {len(doubled)}")
        return {"doubled": doubled} if doubled else None
''')


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the handshake protocol clients speak today
def test_an_agent_writes_tries_and_switches_on_a_sense_and_hears_its_signals(home: Path) -> None:
    write_instance(home, """
        senses:
          counter: {}
        reflexes:
          - {sense: counter, interval: 1h}
    """, {"counter": COUNTER}, {"counter": SCHEMA})
    assert generate_migration(home / "senses" / "counter") is not None
    with RunningEngine(home) as engine:
        engine.wait_ready()
        updates: list[str] = []

        async def heard(message: Any) -> None:  # notifications/resources/updated, as a client receives them
            uri = getattr(getattr(message, "params", None), "uri", None)
            if uri is not None:
                updates.append(str(uri))

        async def body(session: ClientSession) -> None:
            made = await _call(session, "new_sense", name="doubler", on=["nums"])
            assert (made["enabled"], made["reflex"], made["files"][:2]) == (
                False, {"on": ["nums"]}, ["senses/doubler/schema.py", "senses/doubler/sense.py"])
            await _call(session, "write_sense_file", sense="doubler", file="schema.py", text=DOUBLER_SCHEMA)
            # the template's own table goes: it holds no rows (the sense never ran), so no allow_data_loss is needed
            migrated = await _call(session, "migrate_sense", sense="doubler")
            assert migrated["senses"][0]["file"].startswith("senses/doubler/migrations/0002_")
            written = await _call(session, "write_sense_file", sense="doubler", file="sense.py", text=DOUBLER)
            assert (written["path"], written["changed"]) == ("senses/doubler/sense.py", True)
            escape = await _error(session, "write_sense_file", sense="../counter", file="sense.py", text="x = 1")
            assert "invalid sense name" in escape["message"]
            checked = await _call(session, "check_config")
            assert checked["valid"], checked["problems"]

            tried = await _call(session, "dry_run_sense", sense="doubler",
                                events=[{"source": "nums", "payload": {"n": 2}}, {"source": "nums", "payload": {"n": 3}}])
            assert (tried["outcome"], tried["payload"], tried["database"]) == ("signal", {"doubled": [4, 6]}, "copy")
            assert tried["tables"][0]["inserted"] == 2 and tried["output"][0]["text"] == "doubled 2"
            assert not (home / "data" / "senses" / "doubler.db").exists()  # tried, and nothing was kept

            listed = {str(r.uri) for r in (await session.list_resources()).resources}
            assert {"nerve://senses", "nerve://threads/waiting", "nerve://sense/counter", "nerve://sense/doubler"} <= listed
            templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
            assert {"nerve://sense/{name}", "nerve://sense/{name}/schema.py", "nerve://thread/{run_id}"} <= templates
            schema_py = (await session.read_resource("nerve://sense/doubler/schema.py")).contents[0].text
            assert "class Seen" in schema_py
            await session.subscribe_resource("nerve://sense/doubler")

            enabled = await _call(session, "enable_sense", sense="doubler")
            assert enabled["enabled"] and enabled["changed"]
            wait_for(lambda: "doubler" in {w for g in engine.status()["workers"] for w in g["loaded"]}, 20,
                     what="the engine to load the enabled sense")
            await _call(session, "emit", channel="nums", payload={"n": 21})
            for _ in range(400):  # the notification, then the resource says what it signalled
                if "nerve://sense/doubler" in updates:
                    break
                await asyncio.sleep(0.025)
            assert "nerve://sense/doubler" in updates, updates
            shown = json.loads((await session.read_resource("nerve://sense/doubler")).contents[0].text)
            assert shown["signals"][-1]["payload"] == {"doubled": [42]}

            prompts = {p.name for p in (await session.list_prompts()).prompts}
            assert prompts == {"write_sense", "triage_waiting_threads", "why_is_it_quiet"}
            text = (await session.get_prompt("write_sense", {"goal": "count open PRs"})).messages[0].content.text
            assert "count open PRs" in text and "dry_run_sense" in text

        _mcp(home, body, message_handler=heard)
        engine.stop()
    assert CHECKED.kinds >= set(AUTHORING.values()), set(AUTHORING.values()) - CHECKED.kinds


def test_authoring_matches_names_whole_and_never_writes_through_a_planted_file(home: Path, tmp_path: Path) -> None:
    """`new_sense` took the name "x\\n" (the pattern's `$` matched before a trailing newline) and made a folder,
    a nerve.yaml key and a database with a newline in their names; `write_sense_file` wrote through a link
    planted at its temporary file's name (`.sense.py.<pid>.new`) and overwrote a file outside the instance."""
    from nerve_cli.config.load import validate_text
    from nerve_cli.mcp.authoring import write_sense_file

    write_instance(home, "senses:\n  counter: {}\n", {"counter": COUNTER}, {"counter": SCHEMA})

    async def body(session: ClientSession) -> None:
        for name in ("x\n", "bad\nname", "x\r"):
            refused = await _error(session, "new_sense", name=name)
            assert "name" in refused["message"], refused

    _mcp(home, body)
    assert sorted(p.name for p in (home / "senses").iterdir()) == ["counter"]
    assert "x" not in (home / "nerve.yaml").read_text().split("senses:")[1].split("\n", 2)[1]
    _, problems = validate_text('senses:\n  "x\\n": {}\n')
    assert any("x\\n" in str(p) or "name" in str(p) for p in problems), problems
    cli_made = nerve("sense", "new", "y\n", home=home)
    assert cli_made.returncode != 0 and not (home / "senses" / "y\n").exists()

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    planted = home / "senses" / "counter" / f".sense.py.{os.getpid()}.new"
    planted.symlink_to(outside)
    written = write_sense_file(home, "counter", "sense.py", "def compute(db, peers):\n    return 2\n")
    assert written["changed"] is True
    assert outside.read_text() == "keep me\n"
    assert (home / "senses" / "counter" / "sense.py").read_text().endswith("return 2\n")
    assert not (home / "senses" / "counter" / "sense.py").is_symlink()


def _signal_by_hand(home: Path, n: int) -> None:
    """A new signal row in counter's database (what the fingerprint of nerve://sense/counter follows)."""
    path = home / "data" / "senses" / "counter.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER, payload TEXT)")
    conn.execute("INSERT INTO _signals (ts, payload) VALUES (?, ?)", (n, json.dumps({"n": n})))
    conn.commit()
    conn.close()


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.filterwarnings("ignore:resources/unsubscribe is removed")
def test_subscriptions_end_when_asked_begin_at_once_and_a_missing_resource_is_not_found(home: Path) -> None:
    """resources/unsubscribe did nothing (subscriptions were keyed by a session object the SDK makes anew per
    request); a subscriptions/listen stream missed a change in its first ~0.5 s; reading a missing resource
    returned an error document as its content."""
    from mcp.client.subscriptions import listen
    from mcp.shared.exceptions import MCPError

    _instance(home)
    _signal_by_hand(home, 1)
    uri = "nerve://sense/counter"
    updates: list[str] = []

    async def heard(message: Any) -> None:
        found = getattr(getattr(message, "params", None), "uri", None)
        if found is not None:
            updates.append(str(found))

    async def until(condition: Any, seconds: float) -> bool:
        for _ in range(int(seconds / 0.05)):
            if condition():
                return True
            await asyncio.sleep(0.05)
        return condition()

    async def body(session: ClientSession) -> None:
        await session.subscribe_resource(uri)
        _signal_by_hand(home, 2)
        assert await until(lambda: uri in updates, scaled(10)), "subscribed: the change is told"
        await session.unsubscribe_resource(uri)
        updates.clear()
        _signal_by_hand(home, 3)
        await asyncio.sleep(1.5)  # three looks of the watcher: nothing may come now
        assert updates == [], "unsubscribed: nothing more is told"

        for missing in ("nerve://sense/nope", "nerve://thread/run-404"):
            with pytest.raises(MCPError) as raised:
                await session.read_resource(missing)
            assert raised.value.error.code == -32602 and "no " in raised.value.error.message, missing

    _mcp(home, body, message_handler=heard)

    async def listening() -> None:  # the 2026-07-28 protocol: server/discover, then a listen stream
        env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
        params = StdioServerParameters(command=sys.executable, args=["-m", "nerve_cli", "mcp", "--home", str(home)],
                                       env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.discover()
            async with listen(session, resource_subscriptions=[uri]) as stream:
                _signal_by_hand(home, 4)  # at once, before the watcher's first look
                with anyio.fail_after(scaled(10)):
                    event = await stream.__anext__()
                assert uri in str(event), event

    asyncio.run(listening())
