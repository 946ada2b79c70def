"""Whether the engine traces, and where to: decided without importing OpenTelemetry.

Tracing is on when nerve.yaml sets `engine.otel.endpoint`, or the environment has the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); off when `engine.otel.enabled` is
false, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. nerve.yaml's endpoint wins over the
environment's; every other `OTEL_*` variable (headers, timeouts, sampler, resource attributes, service name)
keeps its standard meaning. Prompt and answer contents are exported only when `engine.otel.capture_content`
is true or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from nerve_cli.config.model import EngineConfig

TRUE = ("true", "1", "yes", "on")


@dataclass(frozen=True)
class TraceSettings:
    endpoint: str | None  # OTLP/HTTP base URL from nerve.yaml (…/v1/traces is added); None: the environment's
    capture_content: bool


def trace_settings(engine: EngineConfig, env: Mapping[str, str] = os.environ) -> TraceSettings | None:
    """The engine's tracing, or None when it is off."""
    otel = engine.otel
    if (otel is not None and not otel.enabled) or env.get("OTEL_SDK_DISABLED", "").lower() in TRUE:
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return None
    endpoint = otel.endpoint if otel is not None else None
    if endpoint is None and not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return None
    capture = (otel is not None and otel.capture_content) or \
        env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() in TRUE
    return TraceSettings(endpoint.rstrip("/") if endpoint else None, capture)
