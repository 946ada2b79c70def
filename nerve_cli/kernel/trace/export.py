"""Sending spans and log records, and saying once when it cannot (in the exporter process, `exporter`).

With the collector down, each export retries until its timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default)
while the exporter's queue fills and then drops the newest. These wrappers turn the OTLP exporters' outcome
into one console warning per outage (and one line when it is back), instead of the SDK's warning per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

Say = Callable[[str, str], None]  # (level, line): said on the engine's console

# the exporters log each failed batch (and each retry) themselves; one line per outage is said here instead
for _name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk._shared_internal",
              "opentelemetry.sdk.trace.export", "opentelemetry.sdk._logs._internal.export"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


class _Outages:
    def __init__(self, what: str, say: Say) -> None:
        self.what, self.say = what, say
        self.failing = False

    def outcome(self, ok: bool, count: int, endpoint: str) -> None:
        """Say so once when exports start failing, and once when they work again."""
        if ok == (not self.failing):
            return
        self.failing = not ok
        if ok:
            line = f"traces: exporting {self.what} to {endpoint} again"
        else:
            line = (f"traces: could not export {count} {self.what} to {endpoint}; the engine runs on, and "
                    f"{self.what} beyond the queue are dropped until the collector answers (said once)")
        self.say("warn" if not ok else "info", line)


class Exporting(SpanExporter):
    def __init__(self, inner: Any, what: str, say: Say) -> None:
        self.inner = inner
        self.outages = _Outages(what, say)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter bug must not end the export thread
            result = SpanExportResult.FAILURE
        self.outages.outcome(result is SpanExportResult.SUCCESS, len(spans), getattr(self.inner, "_endpoint", "?"))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class LogExporting(LogRecordExporter):
    def __init__(self, inner: Any, what: str, say: Say) -> None:
        self.inner = inner
        self.outages = _Outages(what, say)

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.inner.export(batch)
        except Exception:  # an exporter bug must not end the export thread
            result = LogRecordExportResult.FAILURE
        self.outages.outcome(result is LogRecordExportResult.SUCCESS, len(batch), getattr(self.inner, "_endpoint", "?"))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
