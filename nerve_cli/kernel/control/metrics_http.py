"""The metrics endpoint's HTTP side: GET and HEAD /metrics on the engine's loop, bounded like the control socket.

The format is negotiated by prometheus-client's own exposition: the Prometheus
text format by default, OpenMetrics when the scraper's `Accept` asks for
`application/openmetrics-text` (as Prometheus does), gzip when it accepts it.
HEAD answers the same headers without the body.

Every open connection holds one of the kernel's file descriptors, which its
workers and databases need: at most `MAX_CONNECTIONS` are served at once (the
next is answered 503 and closed at once, and the engine logs one line when the
cap is reached), and one that has not sent its request within `READ_TIMEOUT`
is closed. 1,500 idle connects once took the kernel to its fd limit.
"""

from __future__ import annotations

import asyncio
import gzip
from typing import Awaitable, Callable

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from nerve_cli.errors import NerveError
from nerve_cli.kernel.control.cap import ConnectionCap, OnBusy

MAX_REQUEST = 8192  # a request line and headers; a scrape sends a few hundred bytes
MAX_CONNECTIONS = 32  # a scraper holds one; a few scrapers and a person with curl are far below
READ_TIMEOUT = 5.0  # seconds a connection may take to send its request
PATHS = (b"/metrics", b"/metrics/")

BeforeScrape = Callable[[], Awaitable[None]]  # brings what is counted lazily up to date (listener backlogs)


class MetricsServer:
    """GET and HEAD /metrics on HOST:PORT; another method is 405, another path a 404 saying where to look."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, on_busy: OnBusy | None = None,
                 before_scrape: BeforeScrape | None = None) -> None:
        self.registry = registry
        self.before_scrape = before_scrape
        self.host, self.port = host, port
        self.cap = ConnectionCap(MAX_CONNECTIONS, on_busy)
        self.refused = 0  # connections closed at once because the cap was reached
        self.server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        try:
            self.server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_REQUEST)
        except OSError as exc:
            raise NerveError(f"metrics on {self.host}:{self.port}: cannot listen there ({exc.strerror}); "
                             "pick another port, e.g. --metrics 127.0.0.1:9465") from None
        if self.port == 0:
            self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            try:
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.cap.admit():
            self.refused += 1
            self.cap.refuse(writer, b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n"
                                    b"Connection: close\r\n\r\n")
            return
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            method, path, headers = _parse(head)
            if path not in PATHS:
                await _answer(writer, 404, "Not Found", "text/plain; charset=utf-8",
                              b"Nerve serves Prometheus metrics at GET /metrics\n")
            elif method not in (b"GET", b"HEAD"):
                await _answer(writer, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                              b"/metrics answers GET and HEAD\n", extra="Allow: GET, HEAD\r\n")
            else:
                if self.before_scrape is not None:
                    await self.before_scrape()
                encoder, content_type = choose_encoder(headers.get("accept", ""))
                body, extra = encoder(self.registry), ""
                if gzip_accepted(headers.get("accept-encoding", "")):
                    body, extra = gzip.compress(body), "Content-Encoding: gzip\r\n"
                await _answer(writer, 200, "OK", content_type, body, extra=extra, send_body=method == b"GET")
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            self.cap.release()
            writer.close()


def _parse(head: bytes) -> tuple[bytes, bytes, dict[str, str]]:
    """(method, path without its query, headers by lower-case name) of a request head."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    method = parts[0] if parts else b""
    path = parts[1].split(b"?")[0] if len(parts) > 2 else b""
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return method, path, headers


async def _answer(writer: asyncio.StreamWriter, code: int, reason: str, content_type: str, body: bytes, *,
                  extra: str = "", send_body: bool = True) -> None:
    writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                 f"{extra}Connection: close\r\n\r\n".encode() + (body if send_body else b""))
    await writer.drain()
