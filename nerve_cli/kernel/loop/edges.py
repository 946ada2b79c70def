"""The engine's optional edges, each started into the engine's exit stack only when its settings ask:
traces (OpenTelemetry), the fleet (NATS), webhooks (uvicorn), file reflexes (watchfiles), metrics
(prometheus-client). Each heavy library is imported here, when its edge starts, never at the engine's import.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from nerve_cli.address import ListenAddress
from nerve_cli.config.model import FleetConfig, NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.loop.router import Router
from nerve_cli.kernel.trace.settings import trace_settings
from nerve_cli.names import default_host
from nerve_cli.vocab import logrows
from nerve_cli.vocab.reasons import Reason

if TYPE_CHECKING:
    from nerve_cli.kernel.fleet.service import Fleet
    from nerve_cli.kernel.ingress.files import FileReflexes
    from nerve_cli.kernel.ingress.webhooks import Ingress, WebhookServer
    from nerve_cli.kernel.trace.spans import Tracing


def start_tracing(stack: AsyncExitStack, config: NerveConfig, home: Path, report: Report,
                  has_agents: Callable[[], bool] = lambda: False) -> Tracing | None:
    """Spans over OpenTelemetry, when engine.otel or OTEL_* switch them on; closed (what is queued goes,
    within the exporter's timeout) after the last log row is written. The kernel makes them as plain records;
    the exporter process (`trace.exporter`, started here) imports the SDK and exports them. `has_agents`:
    nerve.yaml has agents now (their deliveries are spans too, `trace.deliveries`)."""
    settings = trace_settings(config.engine)
    if settings is None:
        return None
    missing = _otel_missing()
    if missing is not None:
        report("warn", f"traces are switched on (engine.otel or OTEL_EXPORTER_OTLP_ENDPOINT) but "
                       f"OpenTelemetry is not installed ({missing}): pip install 'nerve-cli[otel]'; "
                       "running without traces")
        return None
    from nerve_cli.kernel.trace.spans import Tracing

    fleet = config.live_fleet()
    tracing = Tracing(settings, fleet.host_name if fleet is not None else default_host(), str(home), report)
    tracing.start()
    report("info", f"traces to {settings.endpoint or 'the OTEL_EXPORTER_OTLP_* endpoint'} "
                   f"(sampler {tracing.sampler.description})")

    from nerve_cli.kernel.trace.deliveries import DeliveryTraces

    deliveries = DeliveryTraces(tracing, Layout(home).data, has_agents)
    deliveries.start()

    async def close() -> None:
        await deliveries.stop()
        await tracing.close()

    stack.push_async_callback(close)
    return tracing


def _otel_missing() -> str | None:
    """The module of the `otel` extra that cannot be found (the exporter process imports them), or None. Found,
    not imported: the kernel never loads OpenTelemetry."""
    import importlib.util

    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except ImportError as exc:
            return exc.name or module
        except ValueError:
            return module
    return None


class FleetEdge:
    """This host in its fleet, while nerve.yaml has an enabled `fleet:`; a change closes the old link and
    starts a new one (the outbox keeps its marks), one change after the other."""

    def __init__(self, router: Router, data: Path, emit_many: Callable[[list], list], log: Log, report: Report,
                 traceparent: Callable[[str], str | None] | None) -> None:
        self.router = router
        self.data = data
        self.emit_many = emit_many
        self.log = log
        self.report = report
        self.traceparent = traceparent
        self.stopping = False
        self._change: asyncio.Task | None = None

    @property
    def fleet(self) -> Fleet | None:
        return self.router.fleet

    def start(self, config: FleetConfig | None) -> None:
        if config is None or self.stopping:
            return
        # imported here: nats loads only in an engine whose nerve.yaml has a fleet
        from nerve_cli.kernel.fleet.service import Fleet

        self.router.fleet = Fleet(config, self.data, self.emit_many, self.log, self.report, self.traceparent,
                                  self.router.causes)
        self.router.fleet.start()

    def apply_config(self, config: NerveConfig) -> None:
        if config.live_fleet() != (self.fleet.config if self.fleet is not None else None):
            previous = self._change
            self._change = asyncio.get_running_loop().create_task(self._after(previous, config.live_fleet()))

    async def _after(self, previous: asyncio.Task | None, config: FleetConfig | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        await self._close_link()
        self.start(config)

    async def _close_link(self) -> None:
        fleet, self.router.fleet = self.router.fleet, None
        if fleet is not None:
            await fleet.close()

    async def close(self) -> None:
        """Before the emit desk closes: the inbox commits through it."""
        self.stopping = True
        if self._change is not None:
            await asyncio.gather(self._change, return_exceptions=True)
        await self._close_link()


class FileEdge:
    """File reflexes, while a reflex watches paths (watchfiles loads only then)."""

    def __init__(self, home: Path, trigger: Callable[[str, Reason], None], log: Log, report: Report) -> None:
        self.home = home
        self.trigger = trigger
        self.log = log
        self.report = report
        self.files: FileReflexes | None = None

    def apply_config(self, config: NerveConfig) -> None:
        if self.files is None:
            if not any(r.paths for r in config.active_reflexes()):
                return
            # imported here: watchfiles' file reflexes load only when a reflex watches paths
            from nerve_cli.kernel.ingress.files import FileReflexes

            self.files = FileReflexes(self.home, self.trigger, self.log, self.report)
        self.files.apply_config(config)

    async def close(self) -> None:
        if self.files is not None:
            await self.files.close()


async def start_webhooks(stack: AsyncExitStack, ingress: Ingress, address: ListenAddress | None,
                         log: Log, report: Report) -> WebhookServer | None:
    if address is None:
        return None
    # uvicorn and starlette load only when webhooks are on
    from nerve_cli.kernel.ingress.webhooks import WebhookServer

    server = WebhookServer(ingress, address, report)
    await server.start()
    stack.push_async_callback(server.close)  # what is in flight is answered after its commit
    log(logrows.webhooks_started(server.url, sorted(ingress.config.webhook_channels())))
    report("info", f"webhooks on {server.url}CHANNEL")
    return server


async def start_metrics(stack: AsyncExitStack, observed: Any, address: ListenAddress | None, log: Log,
                        report: Report) -> Any:
    """Prometheus metrics, with --metrics or engine.metrics (prometheus-client loads only then)."""
    if address is None:
        return None
    # imported here: prometheus-client loads only with --metrics or engine.metrics (off by default)
    from nerve_cli.kernel.control.metrics import registry
    from nerve_cli.kernel.control.metrics_http import MetricsServer

    def busy(connections: int, limit: int) -> None:
        log(logrows.metrics_busy(connections, limit))
        report("warn", f"metrics: {limit} connections open, answering 503 to more until some close")

    server = MetricsServer(registry(observed), address.host, address.port, busy, observed.refresh_listener_health)
    await server.start()
    stack.push_async_callback(server.close)
    report("info", f"metrics on {server.url}")
    if not address.loopback:
        report("warn", exposed_metrics(address))
    return server


def exposed_metrics(address: ListenAddress) -> str:
    """The warning for metrics served beyond this machine."""
    return (f"metrics on {address} can be read from other machines: they name your senses, workflows, channels "
            "and models; listen on 127.0.0.1 (--metrics 127.0.0.1:PORT) or put a firewall or an authenticating "
            "proxy in front")
