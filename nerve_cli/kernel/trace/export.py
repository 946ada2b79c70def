"""Sending spans and log records without holding up the engine, and saying once when it cannot.

The SDK's batch processors run the OTLP exporter in a thread of their own, behind a bounded queue: with the
collector down, each export retries until its timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default) while
the queue fills and then drops the newest. These wrappers turn the exporter's outcome into one console
warning per outage (and one line when it is back), instead of the SDK's warning per batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from nerve_cli.kernel.core.report import Report

# the exporters log each failed batch (and each retry) themselves; one line per outage is said here instead
for _name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk._shared_internal",
              "opentelemetry.sdk.trace.export", "opentelemetry.sdk._logs._internal.export"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


class _Outages:
    def __init__(self, what: str, report: Report, loop: asyncio.AbstractEventLoop) -> None:
        self.what, self.report, self.loop = what, report, loop
        self.failing = False

    def outcome(self, ok: bool, count: int, endpoint: str) -> None:
        """In the exporter's thread: say so once when exports start failing, and once when they work again."""
        if ok == (not self.failing):
            return
        self.failing = not ok
        if ok:
            line = f"traces: exporting {self.what} to {endpoint} again"
        else:
            line = (f"traces: could not export {count} {self.what} to {endpoint}; the engine runs on, and "
                    f"{self.what} beyond the queue are dropped until the collector answers (said once)")
        try:
            self.loop.call_soon_threadsafe(self.report, "warn" if not ok else "info", line)
        except RuntimeError:  # the loop is closed: the engine has stopped
            pass


class Exporting(SpanExporter):
    def __init__(self, inner: Any, what: str, report: Report, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.outages = _Outages(what, report, loop)

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
    def __init__(self, inner: Any, what: str, report: Report, loop: asyncio.AbstractEventLoop) -> None:
        self.inner = inner
        self.outages = _Outages(what, report, loop)

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
