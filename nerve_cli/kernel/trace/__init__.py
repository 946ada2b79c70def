"""Traces: the engine's causal chains exported over OpenTelemetry (OTLP/HTTP), when switched on.

`settings` decides from nerve.yaml's `engine.otel` and the standard `OTEL_*` variables whether tracing is on,
without importing OpenTelemetry; `spans` (which imports it, from the optional `otel` extra) turns what the
engine does into spans and log records; `export` sends them without ever holding up the engine.
"""
