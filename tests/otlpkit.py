"""An OTLP/HTTP receiver on loopback for the tracing tests: what the engine exports, decoded with the official
`opentelemetry-proto` classes (the collector's own wire format), kept as plain spans and log records."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class LogRecord:
    trace_id: str
    span_id: str
    severity: str
    body: Any
    attributes: dict[str, Any]


class Receiver:
    """POST /v1/traces and /v1/logs on 127.0.0.1:<free port>; `endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.logs: list[LogRecord] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._traces(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/logs":
                    receiver._logs(ExportLogsServiceRequest.FromString(body))
                    answer = ExportLogsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _traces(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    found.append(Span(
                        s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.kind,
                        s.start_time_unix_nano, s.end_time_unix_nano,
                        {kv.key: _value(kv.value) for kv in s.attributes}, s.status.code, s.status.message,
                        [(e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events], resource))
        with self._lock:
            self.requests += 1
            self.spans.extend(found)

    def _logs(self, request: ExportLogsServiceRequest) -> None:
        found = [LogRecord(r.trace_id.hex(), r.span_id.hex(), r.severity_text, _value(r.body),
                           {kv.key: _value(kv.value) for kv in r.attributes})
                 for resource_logs in request.resource_logs for scope in resource_logs.scope_logs
                 for r in scope.log_records]
        with self._lock:
            self.requests += 1
            self.logs.extend(found)

    def named(self, prefix: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.name.startswith(prefix)]

    def by_id(self) -> dict[str, Span]:
        with self._lock:
            return {s.span_id: s for s in self.spans}

    def start(self) -> "Receiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

