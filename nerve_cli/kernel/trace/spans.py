"""What the engine does, as OpenTelemetry spans: one trace per causal chain.

An event stored (an emit, a webhook, an event received from the fleet) is a span, the child of the
W3C `traceparent` it came with, if any. A compute is the child of whatever woke it: the compute whose signal
woke it, or the span of the emit, or a new trace when a timer or a person started it. A signal is an event
(`signal`, with its id) on its compute's span. A thread launched by a sense's directive is the child of that
sense's compute; each round is a child of the thread, and a model call within a round a
child of the round for each call the model answered, at the times it ran, with the OpenTelemetry GenAI
attributes (`gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.conversation.id` = the run id, token usage,
finish reasons); the tool calls that ran in a round are `execute_tool` spans beside them under the round (the
calls a person was asked about, rejected or that a cancel stopped are not), their results as JSON. Errors,
timeouts and lost computes are error spans, and log records with the file:line.

The kernel knows every one of these moments, so every span is made here, with the times the kernel saw;
workers import nothing of OpenTelemetry, and neither does the kernel: a span here is a plain record (ids,
name, times, attributes, events), sampled by the standard variables (`sampling`), and an ended one is a
tuple handed to the `outbox`, which batches them to the exporter process (`exporter`): the SDK's objects, the
protobuf encoding and the HTTP export all run there, on a core and an interpreter lock of their own. (The
SDK's span bookkeeping and its export thread in the kernel cost 1.3-1.8x the hop's kernel CPU.) A model
call's and a tool call's times are the ones their worker recorded (meta `model_calls`, a tool call's
`started_ms`); error spans carry `error.type`.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import OrderedDict
from typing import Any

import orjson

from nerve_cli.kernel.core.report import Report
from nerve_cli.kernel.trace import semconv
from nerve_cli.kernel.trace.outbox import Outbox
from nerve_cli.kernel.trace.sampling import Sampler, sampler_from_env
from nerve_cli.kernel.trace.settings import TraceSettings
from nerve_cli.vocab import states
from nerve_cli.vocab.logrows import LogKind, LogRow
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import Reason

MAX_SOURCES = 10_000  # sources whose latest event's context is kept (channels are free text)
FAILED = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.LOST)
ERROR_TYPE = "error.type"  # the conventions' attribute on every error span

# OpenTelemetry's span kinds and status codes, as the SDK numbers them (opentelemetry.trace.SpanKind, StatusCode)
INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER = 0, 1, 2, 3, 4
UNSET, OK, ERROR = 0, 1, 2
SEVERITY_ERROR = 17  # SeverityNumber.ERROR
SAMPLED, RANDOM_TRACE_ID = 0x01, 0x02  # W3C trace flags (the SDK sets the second on the ids it makes)

# a span's context: (trace id, span id, trace flags, made on another host or process)
Context = tuple[int, int, int, bool]
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\Z")


def context_of(traceparent: str | None) -> Context | None:
    """A W3C traceparent header's context (None for none or a malformed one: the span starts a new trace), read
    as OpenTelemetry's TraceContextTextMapPropagator reads it."""
    if not traceparent:
        return None
    match = _TRACEPARENT.match(traceparent.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, extra = match.groups()
    if version == "ff" or (version == "00" and extra) or int(trace_id, 16) == 0 or int(span_id, 16) == 0:
        return None
    return int(trace_id, 16), int(span_id, 16), int(flags, 16), True


def traceparent_of(context: Context | None) -> str | None:
    if context is None:
        return None
    return f"00-{context[0]:032x}-{context[1]:016x}-{context[2]:02x}"


def _env_endpoint() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def _span_id() -> int:
    while True:
        found = random.getrandbits(64)
        if found:
            return found


def _trace_id() -> int:
    while True:
        found = random.getrandbits(128)
        if found:
            return found


class Span:
    """A span being made: what OpenTelemetry's SDK span records, without its checks and locks. `end` hands it,
    as one tuple, to the outbox, unless it was not sampled (its context still parents its children)."""

    __slots__ = ("outbox", "name", "context", "parent", "kind", "start", "attributes", "events", "links", "status",
                 "message", "ended")

    def __init__(self, outbox: Outbox, name: str, context: Context, parent: Context | None, kind: int,
                 start: int, attributes: dict[str, Any], links: list[Context] | None = None) -> None:
        self.outbox, self.name, self.context, self.parent, self.kind = outbox, name, context, parent, kind
        self.start, self.attributes, self.links = start, attributes, links
        self.events: list[tuple[str, int, dict[str, Any] | None]] | None = None
        self.status, self.message, self.ended = UNSET, "", False

    def add_event(self, name: str, attributes: dict[str, Any] | None = None, timestamp: int | None = None) -> None:
        if self.events is None:
            self.events = []
        self.events.append((name, timestamp if timestamp is not None else time.time_ns(), attributes))

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def set_status(self, code: int, message: str) -> None:
        self.status, self.message = code, message

    def end(self, end_time: int | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        context, parent = self.context, self.parent
        if context[2] & SAMPLED:
            self.outbox.add(("s", self.name, context[0], context[1], context[2], parent[1] if parent else 0,
                             parent[2] if parent else 0, parent[3] if parent else False, self.kind, self.start,
                             end_time if end_time is not None else time.time_ns(), self.attributes,
                             self.events or (), self.links or (), self.status, self.message))


class Tracing:
    def __init__(self, settings: TraceSettings, host: str, home: str, report: Report) -> None:
        self.settings = settings
        self.sampler: Sampler = sampler_from_env(warn=lambda line: report("warn", line))
        self.outbox = Outbox(settings.endpoint, host, home, report)
        self.latest: OrderedDict[str, Context] = OrderedDict()  # source → the context its next listeners follow
        self.computes: dict[int, tuple[Span, str]] = {}  # compute id → (its span, its sense)
        self.threads: dict[str, tuple[Span, int]] = {}  # run id → (its span, when its last step ended, ns)
        # (source, event or signal id) → its span's context, kept only while some agent hears events: the parent
        # of the delivery that hands it to the agent (`delivery`)
        self.keep_events = False
        self.events: OrderedDict[tuple[str, int], Context] = OrderedDict()
        self.deliveries: dict[int, tuple[Span, int]] = {}  # delivery id → (its span, times handed), until acked

    def start(self) -> None:
        self.outbox.start()

    def status(self) -> dict[str, Any]:
        """`status`'s `traces`: where to, the sampler, the exporter process and what went (outbox.status)."""
        return {"endpoint": self.settings.endpoint or _env_endpoint(), "sampler": self.sampler.description,
                **self.outbox.status()}

    def start_span(self, name: str, parent: Context | None = None, kind: int = INTERNAL,
                   start_time: int | None = None, attributes: dict[str, Any] | None = None,
                   links: list[Context] | None = None) -> Span:
        """A span: the child of `parent` (its trace, and its sampled flag under a parent-based sampler), or the
        first of a new trace."""
        if parent is None:
            trace_id = _trace_id()
            flags = RANDOM_TRACE_ID | (SAMPLED if self.sampler.sampled(trace_id, None) else 0)
        else:
            trace_id = parent[0]
            flags = (parent[2] & RANDOM_TRACE_ID) | (SAMPLED if self.sampler.sampled(trace_id, bool(parent[2] & SAMPLED)) else 0)
        return Span(self.outbox, name, (trace_id, _span_id(), flags, False), parent, kind,
                    start_time if start_time is not None else time.time_ns(), attributes or {}, links)

    # -- events and computes (the engine calls these) ------------------------------------------------
    def emitted(self, channel: str, event_id: int, origin: str | None, traceparent: str | None) -> None:
        """An event was stored on `channel`: a span of its own, the parent of the computes it wakes."""
        kind = CONSUMER if origin is not None else PRODUCER
        attributes: dict[str, Any] = {"nerve.channel": channel, "nerve.event_id": event_id}
        if origin is not None:
            attributes.update({"nerve.origin": origin, "messaging.system": "nats"})
        span = self.start_span(f"emit {channel}", context_of(traceparent), kind, attributes=attributes)
        span.end()
        self._follow(channel, span.context)
        if self.keep_events:
            self._keep(channel, event_id, span.context)

    def compute_started(self, sense: str, compute_id: int, reason: Reason, group: str) -> None:
        parent = self.latest.get(reason.source) if reason.source is not None else None
        # few attributes (the span's own times give the duration; the reason's text names its kind)
        span = self.start_span(f"compute {sense}", parent, attributes={
            "nerve.sense": sense, "nerve.reason": reason.text, "nerve.group": group, "nerve.compute_id": compute_id})
        self.computes[compute_id] = (span, sense)

    def signalled(self, sense: str, compute_id: int | None, signal_id: int | None) -> None:
        """`sense` signalled (before its listeners are woken): the signal is an event of its compute's span, and
        the computes it wakes are that compute's children (a span per signal doubled the cost of a traced hop)."""
        compute = self.computes.get(compute_id) if compute_id is not None else None
        if compute is None:  # a signal found committed without its answer (the ledger's): no compute to hang it on
            return
        compute[0].add_event("signal", {"nerve.signal_id": signal_id} if signal_id is not None else None)
        context = compute[0].context
        self._follow(sense, context)
        if self.keep_events and signal_id is not None:
            self._keep(sense, signal_id, context)

    def compute_finished(self, compute_id: int, outcome: Outcome, error: dict[str, Any] | None = None) -> None:
        found = self.computes.pop(compute_id, None)
        if found is None:
            return
        span, sense = found
        span.set_attribute("nerve.outcome", outcome.value)
        if outcome in FAILED:
            message = (error or {}).get("message") or outcome.value
            span.set_attribute(ERROR_TYPE, str((error or {}).get("type") or outcome.value))
            span.set_status(ERROR, message)
            attributes = _error_attributes(error, outcome)
            span.add_event("exception", attributes)
            now = time.time_ns()
            context = span.context
            self.outbox.add(("l", now, context[0], context[1], context[2], SEVERITY_ERROR, "ERROR",
                             f"{sense}: {message}", {"nerve.sense": sense, **attributes}))
        span.end()

    def traceparent(self, source: str) -> str | None:
        """The traceparent to send with `source`'s latest event (the fleet carries it to other hosts)."""
        return traceparent_of(self.latest.get(source))

    def _keep(self, source: str, event_id: int, context: Context) -> None:
        self.events[(source, event_id)] = context
        if len(self.events) > MAX_SOURCES:
            self.events.popitem(last=False)

    # -- agents' deliveries (store.inbox, read by kernel.trace.deliveries) ----------------------------------
    def delivery(self, record: Any) -> None:
        """A delivery to an agent (store.inbox.DeliveryRecord) made or changed: `deliver AGENT` (CONSUMER), the
        child of its first event's span and linked to the others', from when it was made to its acknowledgement
        (an `ack` event, by whom); each further hand-over of the same delivery (a harness that restarted) is a
        `handed again` event."""
        known = self.deliveries.get(record.id)
        if known is None:
            contexts = [self.events.get((source, event_id)) for source, event_id in record.refs]
            parent = next((c for c in contexts if c is not None), None)
            links = [c for c in contexts[1:] if c is not None]
            span = self.start_span(f"deliver {record.agent}", parent, CONSUMER,
                                   start_time=record.created_ms * 1_000_000, links=links, attributes={
                                       "nerve.agent": record.agent, "nerve.delivery_id": record.id,
                                       "nerve.events": record.events, "nerve.via": record.via or ""})
            known = self.deliveries[record.id] = (span, 1)
        span, handed = known
        if record.handed > handed:
            span.add_event("handed again", {"nerve.handed": record.handed})
            self.deliveries[record.id] = (span, record.handed)
        if record.acked_ms is not None:
            span.add_event("ack", {"nerve.acked_by": record.acked_by or ""}, timestamp=record.acked_ms * 1_000_000)
            span.end(end_time=max(record.acked_ms * 1_000_000, record.created_ms * 1_000_000))
            del self.deliveries[record.id]

    def _follow(self, source: str, context: Context) -> None:
        self.latest[source] = context
        self.latest.move_to_end(source)
        if len(self.latest) > MAX_SOURCES:
            self.latest.popitem(last=False)

    # -- threads (from the log rows the workflow manager writes) ------------------------------------
    def row(self, row: LogRow) -> None:
        """A log row was written: threads' rows become the thread, round and model-call spans."""
        if row.kind.source.value != "workflow" or row.ref is None:
            return
        now = time.time_ns()
        body: dict[str, Any] = row.payload or {}
        if row.kind is LogKind.THREAD_MESSAGE:
            self._round(row.ref, body, now)
            return
        known = self.threads.get(row.ref)
        if known is None:
            known = self._thread(row.ref, body, now)
        span, _ = known
        status = row.kind.status
        if status is None:
            return
        span.add_event(status.value, _scalars(body))
        if not status.live:  # it ended (completed, failed, crashed, dropped, cancelled...)
            span.set_attribute("nerve.status", status.value)
            if body.get("reason") is not None:
                span.set_attribute("nerve.reason", str(body["reason"]))
            if row.kind in (LogKind.THREAD_FAILED, LogKind.THREAD_CRASHED):
                span.set_attribute(ERROR_TYPE, str(_mapping(body.get("error")).get("type") or status.value))
                span.set_status(ERROR, str(body.get("reason") or body.get("error") or status.value))
            span.end(end_time=now)
            del self.threads[row.ref]
        else:
            self.threads[row.ref] = (span, now)

    def _thread(self, run_id: str, body: dict[str, Any], now: int) -> tuple[Span, int]:
        sense = _mapping(body.get("origin")).get("sense")
        sense = sense if isinstance(sense, str) else None
        parent = self.latest.get(sense) if sense is not None else None
        span = self.start_span(f"thread {body.get('workflow', '?')}", parent, start_time=now,
                               attributes={"nerve.run_id": run_id, "nerve.workflow": str(body.get("workflow"))})
        if self.settings.capture_content and isinstance(body.get("prompt"), str):
            span.set_attribute("nerve.prompt", body["prompt"])
        self.threads[run_id] = (span, now)
        return span, now

    def _round(self, run_id: str, body: dict[str, Any], now: int) -> None:
        known = self.threads.get(run_id)
        if known is None or body.get("round") is None:
            return  # the start message, or a thread this engine did not see begin
        thread_span, since = known
        role = str(body.get("role"))
        span = self.start_span(f"round {body['round']} {role}", thread_span.context, start_time=since,
                               attributes={"nerve.run_id": run_id, "nerve.round": body["round"], "nerve.role": role})
        meta = _mapping(body.get("meta"))
        given = meta.get("tool_calls")
        tools: list[Any] = given if isinstance(given, list) else []
        if isinstance(meta.get("model"), str):
            calls = [c for c in meta.get("model_calls") or [] if isinstance(c, dict)]
            if calls and all(isinstance(c.get("started_ms"), (int, float)) for c in calls):
                for index, call in enumerate(calls):  # each call the model answered, at the times it ran
                    self._model_call(span, run_id, meta, call, body if index == len(calls) - 1 else None,
                                     tools, now)
            else:  # a role that gave its model but not its calls: one span, its duration before the message
                self._model_call(span, run_id, meta, None, body, tools, now)
        self._tool_calls(span, run_id, tools, now)
        span.end(end_time=now)
        self.threads[run_id] = (thread_span, now)

    def _model_call(self, round_span: Span, run_id: str, meta: dict[str, Any], call: dict[str, Any] | None,
                    last: dict[str, Any] | None, tools: list[Any], now: int) -> None:
        """One model call's `chat` span: `call` (meta `model_calls`' entry) gives its times, tokens and why it
        stopped; `last`: the round's message, for the call whose answer is the message's content."""
        timing = call if call is not None else meta
        usage = _mapping(timing.get("usage"))
        duration = timing.get("duration_ms")
        duration_ns = _ns(duration) if isinstance(duration, (int, float)) else 0
        started = timing.get("started_ms")
        start = _ns(started) if isinstance(started, (int, float)) else now - duration_ns
        end = start + duration_ns if isinstance(started, (int, float)) else now
        attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: "chat", semconv.GEN_AI_REQUEST_MODEL: meta["model"],
                                      semconv.GEN_AI_RESPONSE_MODEL: meta["model"],
                                      semconv.GEN_AI_PROVIDER_NAME: str(meta.get("provider") or "llm"),
                                      semconv.GEN_AI_CONVERSATION_ID: run_id}
        if isinstance(usage.get("input"), int):
            attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = usage["input"]
        if isinstance(usage.get("output"), int):
            attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = usage["output"]
        finish = call.get("finish_reason") if call is not None else None
        if isinstance(finish, str):
            attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = [finish]
        if self.settings.capture_content:
            parts: list[dict[str, Any]] = []
            if last is not None and isinstance(last.get("content"), str):
                parts.append({"type": "text", "content": last["content"]})
            asked = set(call.get("tool_call_ids") or []) if call is not None else set()
            parts += [{"type": "tool_call", "id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                      for c in tools if isinstance(c, dict) and c.get("id") in asked]
            if parts:
                answer = [{"role": "assistant", "parts": parts, "finish_reason": finish or "stop"}]
                attributes[semconv.GEN_AI_OUTPUT_MESSAGES] = orjson.dumps(answer).decode()
        span = self.start_span(f"chat {meta['model']}", round_span.context, CLIENT, start_time=max(start, 0),
                               attributes=attributes)
        span.end(end_time=max(end, start, 0))

    def _tool_calls(self, round_span: Span, run_id: str, calls: list[Any], now: int) -> None:
        """The round's executed tool calls (meta `tool_calls`: id, name, arguments, result or error, started_ms,
        duration_ms) as `execute_tool` spans under the round, beside its model calls, at the times they ran;
        a record without its start (an older worker's) is laid end to end before the round's end."""
        records = [c for c in calls if isinstance(c, dict) and isinstance(c.get("name"), str) and _executed(c)]
        durations = [_ns(c["duration_ms"]) if isinstance(c.get("duration_ms"), (int, float)) else 0
                     for c in records]
        laid = now - sum(d for c, d in zip(records, durations) if not isinstance(c.get("started_ms"), (int, float)))
        context = round_span.context
        for call, duration in zip(records, durations):
            started = call.get("started_ms")
            if isinstance(started, (int, float)):
                start = _ns(started)
            else:
                start, laid = laid, laid + duration
            attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: "execute_tool",
                                          semconv.GEN_AI_TOOL_NAME: call["name"], semconv.GEN_AI_TOOL_TYPE: "function",
                                          semconv.GEN_AI_CONVERSATION_ID: run_id}
            if isinstance(call.get("id"), str):
                attributes[semconv.GEN_AI_TOOL_CALL_ID] = call["id"]
            if self.settings.capture_content:
                attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = orjson.dumps(call.get("arguments")).decode()
                if "result" in call:  # as JSON, as the conventions ask (the record keeps it JSON-able)
                    attributes[semconv.GEN_AI_TOOL_CALL_RESULT] = orjson.dumps(call["result"]).decode()
            span = self.start_span(f"execute_tool {call['name']}", context, INTERNAL, start_time=max(start, 0),
                                   attributes=attributes)
            if call.get("error") is not None:
                error = str(call["error"])
                span.set_attribute(ERROR_TYPE, error.split(":", 1)[0] if ":" in error else "ToolError")
                span.set_status(ERROR, error)
            span.end(end_time=max(start + duration, 0))

    async def close(self) -> None:
        """End what is still open (the engine is stopping) and send what is queued: the exporter process exports
        it before it exits (within its export timeout)."""
        for span, _ in self.computes.values():
            span.end()
        for span, _ in [*self.threads.values(), *self.deliveries.values()]:
            span.add_event("engine_stopped")
            span.end()
        self.computes.clear()
        self.threads.clear()
        self.deliveries.clear()
        await self.outbox.close()


def _executed(call: dict[str, Any]) -> bool:
    """A call that ran in this part of the round: timed (only a call that starts is), and not one rejected,
    refused, cancelled, not run again after an interruption, or recorded again from the part before a person's
    answer (`earlier`)."""
    given = call.get("approval")
    approval: dict[str, Any] = given if isinstance(given, dict) else {}
    if call.get("earlier") or call.get("cancelled") or approval.get("interrupted"):
        return False
    if approval and approval.get("decision") != states.Decision.APPROVE:
        return False
    return "started_ms" in call or "duration_ms" in call


def _error_attributes(error: dict[str, Any] | None, outcome: Outcome) -> dict[str, Any]:
    error = error or {}
    attributes: dict[str, Any] = {semconv.EXCEPTION_TYPE: error.get("type") or outcome.value,
                                  semconv.EXCEPTION_MESSAGE: error.get("message") or outcome.value}
    if error.get("traceback"):
        attributes[semconv.EXCEPTION_STACKTRACE] = error["traceback"]
    if error.get("file"):
        attributes[semconv.CODE_FILE_PATH] = error["file"]
    if error.get("line") is not None:
        attributes[semconv.CODE_LINE_NUMBER] = error["line"]
    return attributes


def _ns(ms: float) -> int:
    """Nanoseconds of a record's milliseconds (epoch or a duration), on the whole microsecond: `ms * 1e6` of an
    epoch is off by up to 128 ns, so two times equal in the record could come out misordered."""
    return round(ms * 1000) * 1000


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _scalars(body: dict[str, Any]) -> dict[str, Any]:
    """A row's plain fields as span event attributes (OpenTelemetry takes scalars only)."""
    return {f"nerve.{k}": v for k, v in body.items() if isinstance(v, (str, int, float, bool)) and k != "prompt"}
