"""Traces over OpenTelemetry: a real engine exports to an OTLP/HTTP receiver that decodes the requests with the
official opentelemetry-proto classes.

emit (with a traceparent) → compute → (its signal) → compute → thread → round → model call (llm-echo) arrive
as one trace with that parent/child structure and their attributes; errors are error spans and log records with
file:line, and so are a compute past its timeout (its worker killed) and a compute whose code crashed its
worker (the file:line from the worker's fatal-error dump); prompt and answer contents only when
opted in; with the receiver gone, the engine keeps its rhythm.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, errors, last_signal, read_logs, wait_for, write_instance
from fleetkit import NatsServer
from llmkit import llm_home  # noqa: F401  (a fixture: LLM_USER_PATH in a tmp folder)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from otlpkit import Receiver, Span
from test_metrics import free_port

from nerve_cli.ops.client import request

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"

CONFIG = """
senses:
  first: {}
  second: {}
  broken: {}
  stuck: {group: slow, timeout: 300ms, grace_period: 300ms}
  crasher: {group: fragile}
  watcher: {}
reflexes:
  - {sense: first, on: [go]}
  - {sense: second, on: [first]}
  - {sense: broken, on: [fail]}
  - {sense: stuck, on: [stall]}
  - {sense: crasher, on: [crash]}
  - {sense: watcher, on: [nerve-threads]}
workflows:
  notes: {model: echo}
"""
SENSES = {
    "first": "def compute(db, peers, trigger):\n    return {'n': len(trigger.events)}\n",
    "second": ("from nerve_cli.sdk import SenseResult\n\ndef compute(db, peers, trigger):\n"
               "    return SenseResult({'ok': True}, workflow='notes|1|write the release notes')\n"),
    "broken": "def compute(db, peers):\n    raise ValueError('the disk is on fire')\n",
    "stuck": "import time\n\ndef compute(db, peers):\n    time.sleep(60)\n",
    "watcher": "def compute(db, peers):\n    return 1\n",
    "crasher": "import ctypes\n\ndef compute(db, peers):\n    ctypes.string_at(0)\n",  # a segfault
}
WORKFLOW = """
from nerve_cli.sdk import END, WorkflowDefinition, llm_role

workflow = WorkflowDefinition(roles={"writer": llm_role()},
                              moderator=lambda m: END if len(m) > 1 else "writer")
"""


def traced_instance(root: Path, otel: str = "") -> Path:
    home = write_instance(root, CONFIG + otel, SENSES)
    (home / "workflows").mkdir()
    (home / "workflows" / "notes.py").write_text(WORKFLOW)
    return home


def one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


@pytest.mark.timeout(120)
def test_an_emit_and_what_it_wakes_arrive_as_one_trace(tmp_path: Path, llm_home: Path) -> None:
    with Receiver() as receiver:
        home = traced_instance(tmp_path / "home")
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready(groups=1)
            sent = cli("emit", "go", '{"n": 1}', "--traceparent", TRACEPARENT, "--home", str(home))
            assert sent.exit_code == 0, sent.output
            assert cli("emit", "fail", "--home", str(home)).exit_code == 0
            assert cli("emit", "stall", "--home", str(home)).exit_code == 0
            assert cli("emit", "crash", "--home", str(home)).exit_code == 0
            wait_for(lambda: receiver.named("chat ") and receiver.named("thread ") and len(receiver.logs) >= 3, 60,
                     what="the chain's spans and the error's log record")
            wait_for(lambda: any(s.name == "thread notes" and s.end_ns for s in receiver.spans), 30,
                     what="the thread to end")
            code, out = engine.stop()
        assert code == 0, out
    spans = [s for s in receiver.spans if s.trace_id == PARENT_TRACE]
    emit = one(spans, "emit go")
    first, second = one(spans, "compute first"), one(spans, "compute second")
    thread = one(spans, "thread notes")
    round_ = one(spans, "round 1 writer")
    chat = one(spans, "chat echo")
    assert emit.parent_id == PARENT_SPAN and emit.attributes["nerve.channel"] == "go"  # the given traceparent
    assert first.parent_id == emit.span_id and first.attributes["nerve.reason"] == "on go"
    assert [name for name, _ in first.events] == ["signal"]  # its signal: an event of the compute
    assert second.parent_id == first.span_id and second.attributes["nerve.outcome"] == "signal"
    assert second.attributes["nerve.reason"] == "on first" and second.attributes["nerve.group"] == "default"
    assert thread.parent_id == second.span_id and thread.attributes["nerve.status"] == "completed"
    assert round_.parent_id == thread.span_id and round_.attributes["nerve.role"] == "writer"
    assert chat.parent_id == round_.span_id and chat.kind == 3  # SPAN_KIND_CLIENT
    assert chat.attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "echo"
    assert chat.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "chat"
    assert chat.attributes[gen_ai.GEN_AI_PROVIDER_NAME] == "echo"
    assert chat.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == thread.attributes["nerve.run_id"]
    assert chat.attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] >= 0
    assert gen_ai.GEN_AI_OUTPUT_MESSAGES not in chat.attributes  # contents only when opted in
    assert "nerve.prompt" not in thread.attributes
    assert chat.start_ns <= chat.end_ns <= round_.end_ns and first.start_ns <= first.end_ns
    assert emit.resource["service.name"] == "nerve"
    broken = [s for s in receiver.spans if s.name == "compute broken"]
    assert broken and broken[0].status == 2 and "the disk is on fire" in broken[0].status_message
    assert broken[0].attributes["error.type"] == "ValueError"
    assert broken[0].trace_id != PARENT_TRACE  # its own chain
    assert broken[0].events[0][1]["code.file.path"].endswith("senses/broken/sense.py")
    assert broken[0].events[0][1]["code.line.number"] == 2
    record = next(r for r in receiver.logs if r.span_id == broken[0].span_id)
    assert record.severity == "ERROR"
    assert record.attributes["code.line.number"] == 2 and "the disk is on fire" in record.body
    stuck = one(receiver.spans, "compute stuck")  # past its timeout, its worker killed after the grace period
    assert stuck.status == 2 and stuck.attributes["nerve.outcome"] in ("timeout", "lost")
    assert stuck.events[0][1]["exception.type"] == "TimeoutError" and "timeout of 0.3s" in stuck.status_message
    assert any(r.severity == "ERROR" and "timeout" in r.body for r in receiver.logs if r.span_id == stuck.span_id)
    # the built-in nerve-threads signals the thread's changes: its listener is the child of that compute
    threads_computes = {s.span_id for s in receiver.spans if s.name == "compute nerve-threads" and s.events}
    assert any(s.parent_id in threads_computes for s in receiver.spans if s.name == "compute watcher")
    crashed = one(receiver.spans, "compute crasher")  # its worker killed by a segfault in its code: where it was
    assert crashed.status == 2 and crashed.attributes["nerve.outcome"] == "lost"
    assert crashed.events[0][1]["code.file.path"] == "senses/crasher/sense.py"
    assert crashed.events[0][1]["code.line.number"] == 4
    assert errors(home, "crasher")[0]["payload"]["line"] == 4  # the log's error row says it too


@pytest.mark.timeout(120)
def test_contents_are_exported_only_when_opted_in(tmp_path: Path, llm_home: Path) -> None:
    with Receiver() as receiver:
        home = traced_instance(tmp_path / "home", f"""engine:
  otel: {{endpoint: "{receiver.endpoint}", capture_content: true}}
""")
        with RunningEngine(home) as engine:  # switched on by nerve.yaml alone
            engine.wait_ready(groups=1)
            assert cli("emit", "go", "--home", str(home)).exit_code == 0
            wait_for(lambda: any(s.name == "thread notes" and s.end_ns for s in receiver.spans), 60,
                     what="the thread's spans")
            engine.stop()
    chat = next(s for s in receiver.spans if s.name == "chat echo")
    assert "write the release notes" in chat.attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES]  # echo answers the prompt
    assert next(s for s in receiver.spans if s.name == "thread notes").attributes["nerve.prompt"] == \
        "write the release notes"


@pytest.mark.timeout(120)
def test_with_the_receiver_gone_the_engine_keeps_its_rhythm_and_warns_once(tmp_path: Path) -> None:
    home = write_instance(tmp_path / "home", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 100ms}
    """, {"tick": "def compute(db, peers):\n    return 1\n"})
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    with RunningEngine(home, env=env) as engine:
        engine.wait_ready()
        wait_for(lambda: "could not export" in engine.output(), 60, what="the exporter's warning")
        ticks = len(read_logs(home, "reflex", "run_complete", "tick"))
        wait_for(lambda: len(read_logs(home, "reflex", "run_complete", "tick")) >= ticks + 20, 30,
                 what="20 more computes at the 100 ms rhythm while every export fails")
        code, out = engine.stop()
    assert code == 0 and "Traceback" not in out, out
    assert out.count("could not export") <= 2  # once for spans, once for log records at most: not per batch


def test_without_the_otel_extra_the_engine_says_how_to_install_it_and_runs_on(tmp_path: Path) -> None:
    blocker = tmp_path / "no-otel" / "opentelemetry"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed', name='opentelemetry')\n")
    home = write_instance(tmp_path / "home", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 100ms}
    """, {"tick": "def compute(db, peers):\n    return 1\n"})
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "PYTHONPATH": str(blocker.parent)}
    with RunningEngine(home, env=env) as engine:
        engine.wait_ready()
        wait_for(lambda: len(read_logs(home, "reflex", "run_complete", "tick")) >= 3, 30, what="computes")
        code, out = engine.stop()
    assert code == 0 and "pip install 'nerve-cli[otel]'" in out and "running without traces" in out


def test_a_bad_traceparent_is_a_usage_error(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    bad = cli("emit", "go", "--traceparent", "00-nope", "--home", str(home))
    assert bad.exit_code == 2 and "W3C trace context" in bad.output
    offline = cli("emit", "go", "--traceparent", TRACEPARENT, "--home", str(home))
    assert offline.exit_code == 0 and "only a running engine continues a trace" in offline.output


@pytest.mark.timeout(120)
def test_a_trace_is_carried_across_the_fleet(tmp_path: Path) -> None:
    with Receiver() as receiver, NatsServer(tmp_path / "nats") as server:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        a = write_instance(tmp_path / "a", f"""
            senses:
              ping: {{}}
            reflexes:
              - {{sense: ping, on: [go]}}
            fleet: {{servers: ["{server.url}"], host: a, publish: {{senses: [ping]}}}}
        """, {"ping": "def compute(db, peers):\n    return 1\n"})
        b = write_instance(tmp_path / "b", f"""
            senses:
              pong: {{}}
            reflexes:
              - {{sense: pong, on: [a/ping]}}
            fleet: {{servers: ["{server.url}"], host: b, subscribe: {{senses: [a/ping]}}}}
        """, {"pong": "def compute(db, peers):\n    return 1\n"})
        with RunningEngine(a, env=env) as engine_a, RunningEngine(b, env=env) as engine_b:
            engine_a.wait_ready()
            engine_b.wait_ready()
            assert cli("emit", "go", "--traceparent", TRACEPARENT, "--home", str(a)).exit_code == 0
            wait_for(lambda: receiver.named("compute pong"), 60, what="b's compute of a's signal")
            engine_a.stop()
            engine_b.stop()
    spans = {s.name: s for s in receiver.spans if s.trace_id == PARENT_TRACE}
    assert spans["emit a/ping"].parent_id == spans["compute ping"].span_id  # received on b, sent by a
    assert spans["emit a/ping"].attributes["nerve.origin"] == "a"
    assert spans["emit a/ping"].resource["host.name"] == "b" and spans["compute ping"].resource["host.name"] == "a"
    assert spans["compute pong"].parent_id == spans["emit a/ping"].span_id


@pytest.mark.timeout(120)
def test_a_webhook_post_reaches_the_fleet_and_continues_the_senders_trace(tmp_path: Path) -> None:
    """A webhook's event on a published channel goes to the fleet like any emit; its traceparent header is the
    parent of the emit on host a, which is the parent of the event received on host b and of b's compute."""
    import httpx  # (installed with mcp)

    with Receiver() as receiver, NatsServer(tmp_path / "nats") as server:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        a = write_instance(tmp_path / "a", f"""
            engine:
              webhooks: 127.0.0.1:0
            channels:
              deploys: {{webhook: true}}
            fleet: {{servers: ["{server.url}"], host: a, publish: {{channels: [deploys]}}}}
        """, {})
        b = write_instance(tmp_path / "b", f"""
            senses:
              hooked: {{}}
            reflexes:
              - {{sense: hooked, on: [deploys]}}
            fleet: {{servers: ["{server.url}"], host: b, subscribe: {{channels: [deploys]}}}}
        """, {"hooked": ("def compute(db, peers, trigger):\n"
                         "    return [[e.source, e.payload] for e in trigger.events]\n")})
        with RunningEngine(a, env=env) as engine_a, RunningEngine(b, env=env) as engine_b:
            engine_a.wait_ready(groups=0)  # a has no senses: nothing but its webhooks and the fleet
            engine_b.wait_ready()
            url = engine_a.status()["webhooks_url"]
            posted = httpx.post(url + "deploys", json={"v": 1}, headers={"traceparent": TRACEPARENT}, timeout=30)
            assert posted.status_code == 202, posted.text
            wait_for(lambda: receiver.named("compute hooked"), 60, what="b's compute of a's webhook event")
            engine_a.stop()
            engine_b.stop()
    assert last_signal(b, "hooked") == [["deploys", {"v": 1}]]
    spans = [s for s in receiver.spans if s.trace_id == PARENT_TRACE]
    sent = next(s for s in spans if s.name == "emit deploys" and s.resource["host.name"] == "a")
    received = next(s for s in spans if s.name == "emit deploys" and s.resource["host.name"] == "b")
    assert sent.parent_id == PARENT_SPAN and received.parent_id == sent.span_id
    assert received.attributes["nerve.origin"] == "a"
    assert one(spans, "compute hooked").parent_id == received.span_id


TOOLS = """
from nerve_cli.sdk import END, WorkflowDefinition, llm_role


def add(a: int, b: int) -> int:
    \"\"\"Adds two numbers.\"\"\"
    return a + b


def flaky(n: int) -> str:
    \"\"\"Fails, always.\"\"\"
    raise RuntimeError(f"flaky {n} broke")


agent = llm_role(model="echo", prompt=lambda m: m[0].content, tools=[add, flaky])
workflow = WorkflowDefinition(roles={"agent": agent},
                              moderator=lambda m: "agent" if m[-1].role == "__start__" else END)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("capture", [False, True])
def test_a_rounds_model_calls_and_tool_calls_are_spans_at_the_times_they_ran(tmp_path: Path, llm_home: Path, capture: bool) -> None:
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", "workflows:\n  agent: {}\n", {})
        (home / "workflows").mkdir()
        (home / "workflows" / "agent.py").write_text(TOOLS)
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true" if capture else "false"}
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready(groups=0)
            calls = [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "flaky", "arguments": {"n": 7}}]
            run_id = request(home, "start_thread", workflow="agent",
                             prompt=json.dumps({"prompt": "go", "tool_calls": calls}))["run_id"]
            wait_for(lambda: any(s.name == "thread agent" and s.end_ns for s in receiver.spans), 60,
                     what="the thread's spans")
            engine.stop()
    recorded = [r["payload"] for r in read_logs(home, "workflow", "message", run_id)][1]["meta"]["tool_calls"]
    round_ = one(receiver.spans, "round 1 agent")
    # two model calls (the one asking for the tools, the one answering with their results): a span each, at
    # the times they ran, with the two executed tools between them, all under the round
    asked, answered = sorted((s for s in receiver.spans if s.name == "chat echo"), key=lambda s: s.start_ns)
    tools = [s for s in receiver.spans if s.name.startswith("execute_tool")]
    add, flaky = one(tools, "execute_tool add"), one(tools, "execute_tool flaky")
    assert len(tools) == 2, [s.name for s in tools]
    assert {asked.parent_id, answered.parent_id, add.parent_id, flaky.parent_id} == {round_.span_id}
    # the records keep their times to 0.1 ms (started_ms, duration_ms): an instant echo and its tools may meet
    # within that
    recorded_to = 100_000
    assert round_.start_ns <= asked.start_ns <= asked.end_ns <= min(add.start_ns, flaky.start_ns) + recorded_to
    assert max(add.end_ns, flaky.end_ns) <= answered.start_ns + recorded_to
    assert answered.start_ns <= answered.end_ns <= round_.end_ns
    for chat in (asked, answered):
        assert chat.attributes[gen_ai.GEN_AI_PROVIDER_NAME] == "echo"
        assert chat.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == run_id
    assert list(asked.attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS]) == ["tool_call"]
    assert list(answered.attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert add.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert add.attributes[gen_ai.GEN_AI_CONVERSATION_ID] == run_id
    assert add.attributes[gen_ai.GEN_AI_TOOL_NAME] == "add" and add.status != 2
    assert [add.attributes[gen_ai.GEN_AI_TOOL_CALL_ID], flaky.attributes[gen_ai.GEN_AI_TOOL_CALL_ID]] == \
        [c["id"] for c in recorded]
    assert flaky.status == 2 and "flaky 7 broke" in flaky.status_message  # the tool raised: an error span
    assert flaky.attributes["error.type"] == "RuntimeError"
    if capture:
        assert json.loads(add.attributes[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"a": 2, "b": 3}
        assert json.loads(add.attributes[gen_ai.GEN_AI_TOOL_CALL_RESULT]) == 5  # JSON, not a Python repr
        said = json.loads(asked.attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES])
        assert said[0]["finish_reason"] == "tool_call"
        assert [p["name"] for p in said[0]["parts"] if p["type"] == "tool_call"] == ["add", "flaky"]
        assert json.loads(answered.attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES])[0]["finish_reason"] == "stop"
    else:
        assert gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS not in add.attributes
        assert gen_ai.GEN_AI_TOOL_CALL_RESULT not in add.attributes


@pytest.mark.timeout(120)
def test_an_agents_delivery_is_a_span_in_the_events_trace_from_emit_to_ack(tmp_path: Path) -> None:
    from enginekit import nerve

    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", "agents:\n  coder: {on: [ci.done], start: all}\n", {})
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready(groups=0)
            sent = cli("emit", "ci.done", '{"ok": false}', "--traceparent", TRACEPARENT, "--home", str(home))
            assert sent.exit_code == 0, sent.output
            taken = json.loads(nerve("agent", "next", "coder", "--json", home=home).stdout)
            assert nerve("agent", "next", "coder", home=home).returncode == 0  # the hook's second take: handed again
            assert nerve("agent", "ack", "coder", home=home).returncode == 0
            wait_for(lambda: any(s.name == "deliver coder" and s.end_ns for s in receiver.spans), 30,
                     what="the delivery's span")
            engine.stop()
    emit = one([s for s in receiver.spans if s.trace_id == PARENT_TRACE], "emit ci.done")
    delivery = one(receiver.spans, "deliver coder")
    assert delivery.trace_id == PARENT_TRACE and delivery.parent_id == emit.span_id
    assert delivery.kind == 5  # SPAN_KIND_CONSUMER
    assert delivery.attributes["nerve.delivery_id"] == taken["delivery"]
    assert [name for name, _ in delivery.events] == ["handed again", "ack"]
    assert emit.start_ns <= delivery.start_ns <= delivery.end_ns


def test_a_records_milliseconds_become_span_nanoseconds_on_the_microsecond() -> None:
    """A tool that ran 0.1 ms from 1796294309378.9 ends when a call recorded at 1796294309379.0 starts (`ms * 1e6`
    put the two 96 ns apart, and a full suite once saw such an end 64 ns after the next call's start)."""
    from nerve_cli.kernel.trace.spans import _ns

    assert _ns(1796294309378.9) + _ns(0.1) == _ns(1796294309379.0) == 1796294309379000000
