"""The exporter process: the kernel's spans and log records made into the SDK's, encoded and sent over OTLP/HTTP.

`python -m nerve_cli.kernel.trace.exporter '{"endpoint": ..., "host": ..., "home": ...}'`, started by the
kernel's `outbox`. Its stdin carries frames (a 4-byte length, then a `marshal`led list of the tuples `spans`
makes); its stdout carries JSON lines back: `{"level", "line"}` to say on the engine's console (an outage
begun or over, once each), `{"exported": n, "dropped": n}` its counts of items so far (at most once a
second). The main thread reads frames into a queue of `QUEUE` items (beyond it, while the collector is down,
the newest are dropped); a thread of its own exports them in batches of up to `BATCH`, every `DELAY` seconds
or as soon as a batch is full. At the end of its input (the engine stopping, or gone) it exports everything
queued — unless the collector is down, then what is left is dropped and counted — and exits. It runs at a
lower priority (`NICE`): on busy cores the kernel and the workers go first, and exports wait.

This module is the only one of the engine's that imports the SDK and the exporters (the kernel never does).
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Any, BinaryIO

import orjson
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from nerve_cli.kernel.trace.export import Exporting, LogExporting

QUEUE = 4096
BATCH = 512
DELAY = 0.5  # seconds between exports when no batch is full
NICE = 10  # added to this process's niceness


class Exporter:
    def __init__(self, endpoint: str | None, host: str, home: str) -> None:
        attributes = {"host.name": host, "nerve.home": home}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "nerve"
        self.resource = Resource.create(attributes)  # with OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
        self.scope = InstrumentationScope("nerve")
        self.limits = SpanLimits()  # OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, ...
        self.spans = Exporting(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces" if endpoint else None),
                               "spans", say)
        self.records = LogExporting(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs" if endpoint else None),
                                    "log records", say)
        self.queue: deque[tuple[Any, ...]] = deque()
        self.ready = threading.Condition()
        self.ending = False
        self.dropped = 0
        self.exported = 0  # items the collector took
        self.said = (0, 0)  # (exported, dropped) as last sent
        self.said_at = 0.0

    # -- the main thread: frames in ----------------------------------------------------------------
    def read(self, stream: BinaryIO) -> None:
        while True:
            head = stream.read(4)
            if len(head) < 4:
                return
            size = int.from_bytes(head, "big")
            frame = stream.read(size)
            if len(frame) < size:
                return
            self.take(marshal.loads(frame))

    def take(self, items: list[tuple[Any, ...]]) -> None:
        with self.ready:
            room = QUEUE - len(self.queue)
            if len(items) > room:
                self.dropped += len(items) - room
                items = items[:max(room, 0)]
            self.queue.extend(items)
            if len(self.queue) >= BATCH:
                self.ready.notify()
        self._say_counts()

    def _say_counts(self, now: bool = False) -> None:
        counts = (self.exported, self.dropped)
        if counts != self.said and (now or time.monotonic() - self.said_at >= 1.0):
            self.said, self.said_at = counts, time.monotonic()
            send({"exported": counts[0], "dropped": counts[1]})

    # -- the export thread: batches out --------------------------------------------------------------
    def run(self) -> None:
        while True:
            with self.ready:
                if not self.ending and len(self.queue) < BATCH:
                    self.ready.wait(DELAY)
                batch = [self.queue.popleft() for _ in range(min(BATCH, len(self.queue)))]
                last = self.ending and not self.queue
            if batch:
                self.export(batch)
                if self.ending and (self.spans.outages.failing or self.records.outages.failing):
                    with self.ready:  # the collector is down: the rest would each wait for the timeout
                        self.dropped += len(self.queue)
                        self.queue.clear()
                    return
            if last:
                return

    def end(self) -> None:
        with self.ready:
            self.ending = True
            self.ready.notify()

    def export(self, batch: list[tuple[Any, ...]]) -> None:
        spans = [self.span(item) for item in batch if item[0] == "s"]
        records = [self.record(item) for item in batch if item[0] == "l"]
        if spans and self.spans.export(spans) is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        if records and self.records.export(records) is LogRecordExportResult.SUCCESS:
            self.exported += len(records)
        self._say_counts()

    def span(self, item: tuple[Any, ...]) -> Any:
        (_, name, trace_id, span_id, flags, parent_id, parent_flags, parent_remote, kind, start, end, attributes,
         events, links, status, message) = item
        limits = self.limits
        return ReadableSpan(
            name, SpanContext(trace_id, span_id, False, TraceFlags(flags)),
            SpanContext(trace_id, parent_id, parent_remote, TraceFlags(parent_flags)) if parent_id else None,
            self.resource, BoundedAttributes(limits.max_span_attributes, attributes,
                                        max_value_len=limits.max_span_attribute_length),
            [Event(event, BoundedAttributes(limits.max_event_attributes, given,
                                       max_value_len=limits.max_attribute_length), at)
             for event, at, given in events],
            [Link(SpanContext(t, s, remote, TraceFlags(f))) for t, s, f, remote in links],
            SpanKind(kind), status=Status(StatusCode(status), message if status == StatusCode.ERROR.value else None),
            start_time=start, end_time=end, instrumentation_scope=self.scope)

    def record(self, item: tuple[Any, ...]) -> Any:
        _, at, trace_id, span_id, flags, severity, severity_text, body, attributes = item
        return ReadableLogRecord(LogRecord(
            timestamp=at, observed_timestamp=at, trace_id=trace_id, span_id=span_id, trace_flags=TraceFlags(flags),
            severity_text=severity_text, severity_number=SeverityNumber(severity), body=body,
            attributes=BoundedAttributes(self.limits.max_attributes, attributes,
                                    max_value_len=self.limits.max_attribute_length)),
            self.resource, self.scope)

    def shutdown(self) -> None:
        self.spans.shutdown()
        self.records.shutdown()
        self._say_counts(now=True)


_out = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.buffer.write(orjson.dumps(message) + b"\n")
        sys.stdout.buffer.flush()


def say(level: str, line: str) -> None:
    send({"level": level, "line": line})


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the kernel's; the end of stdin is ours
    os.nice(NICE)  # the hop (the kernel, the workers) goes first when the cores are busy; exports can wait
    given = orjson.loads(argv[1])
    exporter = Exporter(given.get("endpoint"), given["host"], given["home"])
    thread = threading.Thread(target=exporter.run, name="nerve-otlp-export", daemon=True)
    thread.start()
    try:
        exporter.read(sys.stdin.buffer)
    finally:
        exporter.end()
        thread.join()
        exporter.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
