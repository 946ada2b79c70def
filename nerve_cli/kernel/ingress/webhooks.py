"""`nerve run --webhooks HOST:PORT`: `POST /emit/CHANNEL` for the channels nerve.yaml opens to HTTP.

Served by uvicorn (HTTP/1.1 parsed by httptools, llhttp's C parser) with starlette's request and
response types, on the engine's own event loop: a post is validated, stored
through the same durable emit as `nerve emit` (committed before the answer)
and routed to its listeners without leaving the loop. uvicorn and starlette
are imported only here, and this module only when webhooks are on.

One request, one answer, decided in `WebhookServer.answer` (in this order):

- 404 the path is not `/emit/CHANNEL`, or the channel is not open to webhooks
  (`channels.NAME.webhook: true` in nerve.yaml); 405 a method other than POST;
- 413 a payload over the limit, counted by the one size rule for signals and
  events (`store.events.encode_payload`: the bytes of its compact JSON, so
  spaces in the body do not count); a body over four times that, refused from
  its Content-Length before it is read, or as soon as a chunked one passes it;
- 401 a missing or wrong signature, when the channel has `secret_env`: the
  header (`X-Hub-Signature-256` unless `signature_header` says otherwise)
  must be `sha256=` and the hex HMAC-SHA256 of the body under the secret
  (a post without the header is refused before its body is read); 503 when
  that variable is not set in the engine's environment;
- 503 when the bodies being received at once would pass `MAX_IN_FLIGHT`
  bytes: a body is held in memory until it is verified and stored, so
  this, not the connection cap, bounds what unauthenticated posts can make
  the engine hold (`Retry-After` says when to come back);
- 400 a body that is not JSON;
- 202 with the `emit` document once the event is committed, or 200 with it
  (`duplicate: true`, the first event's id) when its delivery id was seen:
  the value at the channel's `key: body.PATH` in the posted JSON, else the
  delivery header (`delivery_header`, else the first of `DELIVERY_HEADERS`
  present) becomes the emit key, scoped to the channel. A channel with
  `keep_headers` stores `{"headers": {NAME: value}, "body": <the body>}`.

`/answer/TOKEN` is an answer link's page (`kernel.ingress.links`), served on
this same listener. Nothing is stored for any answer but 202. A request's line and headers
may hold `MAX_HEAD` bytes (else 431 and the connection is closed). A request must arrive whole
within `engine.webhook_timeout` (else 408, or the connection is closed
mid-body), and an idle keep-alive connection is closed after `KEEP_ALIVE`
seconds. At most `engine.webhook_connections` are open at once (the next is
answered 503 and closed). Reaching either bound is logged once per siege
(`webhooks_busy`), again only after what is held fell to half of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import orjson
import uvicorn
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nerve_cli.address import ListenAddress
from nerve_cli.config.model import ChannelConfig, NerveConfig
from nerve_cli.contract import errors as error_docs
from nerve_cli.contract.engine import emit as emit_document
from nerve_cli.errors import ErrorType, NerveError
from nerve_cli.kernel.ingress.links import PREFIX as LINKS
from nerve_cli.kernel.ingress.links import LinkDesk
from nerve_cli.names import is_pattern, pattern_matches, traceparent_problem
from nerve_cli.store.events import MAX_KEY, EventError, EventNotStored, PayloadTooLarge
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.wire.protocol import MAX_PAYLOAD, payload_too_large

KEEP_ALIVE = 5.0  # an idle keep-alive connection is closed after this
MAX_BODY = 4 * MAX_PAYLOAD  # as for `nerve emit`'s text: beyond this no spacing could make the JSON fit
MAX_IN_FLIGHT = 2 * MAX_BODY  # bytes of request bodies held at once, before each is verified and stored
RETRY_AFTER = "1"  # seconds, in a 503's Retry-After
PARSE_OFF_LOOP = 256 * 1024  # bodies larger than this are parsed in a thread, not on the engine's loop
DELIVERY_HEADERS = ("X-GitHub-Delivery", "X-Gitea-Delivery", "X-Gitlab-Event-UUID", "Webhook-Id", "Idempotency-Key")
VIA = "webhook"  # how its events arrived, in events.db and their emit log rows
PREFIX = "/emit/"

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
         b"content-length: %d\r\n\r\n%s")
_SLOW = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
         b"content-length: %d\r\n\r\n%s")
_HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                   b"connection: close\r\ncontent-length: %d\r\n\r\n%s")
MAX_HEAD = 16 * 1024  # bytes of a request's line and headers (h11's default bound; the parser itself has none)


class Ingress(Protocol):
    """The running engine, as the webhook server uses it."""

    @property
    def config(self) -> NerveConfig: ...  # read at every request: a reload applies to the next post
    home: Path
    workflows: Any  # its WorkflowManager (None without workflows): answer links answer through it

    def log(self, row: LogRow) -> None: ...

    def emit(self, channel: str, payload: Any, key: str | None = None, via: str | None = None,
             traceparent: str | None = None) -> asyncio.Future:
        """Resolves to (StoredEvent, woken senses) once the event is committed."""


@dataclass(frozen=True)
class Answer:
    status: int
    document: dict[str, Any]
    retry: bool = False  # a 503 the client may retry shortly (Retry-After)


def refused(status: int, message: str, type_: ErrorType = ErrorType.WEBHOOK_REFUSED) -> Answer:
    """An answer with the error document (the shape every `--json` failure has)."""
    return Answer(status, error_docs.error(type_, message, 1))


def signature_ok(secret: bytes, body: bytes | bytearray, header: str | None) -> bool:
    """`sha256=<hex>` (GitHub's X-Hub-Signature-256 form; a bare hex digest too) of the body under `secret`."""
    if not header:
        return False
    given = header.strip()
    if given.lower().startswith("sha256="):
        given = given[len("sha256="):]
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    # as bytes: compare_digest refuses a str with non-ASCII characters, and a header may hold any
    return hmac.compare_digest(expected.encode(), given.lower().encode("utf-8", "surrogateescape"))


def delivery_key(channel: str, settings: ChannelConfig, headers: Any) -> str | None:
    """The emit key of a post: its delivery id, scoped to the channel (ids of two senders never collide)."""
    names = (settings.delivery_header,) if settings.delivery_header else DELIVERY_HEADERS
    delivery = next((headers[n] for n in names if headers.get(n)), None)
    if delivery is None:
        return None
    return scoped_key(channel, delivery)


class Siege:
    """A bound reached is news once: again only after what is held fell to half of it (a `webhooks_busy` row)."""

    def __init__(self, what: str, limit: int, tell: Callable[[str, int, int], None]) -> None:
        self.what, self.limit, self.tell = what, limit, tell
        self._reported = False

    def reached(self, held: int) -> None:
        if not self._reported:
            self._reported = True
            self.tell(self.what, held, self.limit)

    def held(self, held: int) -> None:
        if held <= self.limit // 2:
            self._reported = False


class BodyBudget:
    """The bytes of request bodies the server holds at once, over every connection."""

    def __init__(self, limit: int, siege: Siege) -> None:
        self.limit = limit
        self.held = 0
        self.siege = siege

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            self.siege.reached(self.held)
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size
        self.siege.held(self.held)


def body_key(channel: str, settings: ChannelConfig, payload: Any) -> str | None:
    """The emit key a channel's `key: body.PATH` takes from the posted JSON (None: no such key, or no value)."""
    if settings.key is None:
        return None
    value: Any = payload
    for part in settings.key[len("body."):].split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None or isinstance(value, (dict, list)):
        return None
    return scoped_key(channel, str(value).lower() if isinstance(value, bool) else str(value))


def scoped_key(channel: str, delivery: str) -> str:
    """`webhook:CHANNEL:ID`: ids of two senders never collide; a long one is hashed to fit MAX_KEY."""
    key = f"webhook:{channel}:{delivery}"
    if len(key) > MAX_KEY:
        key = "webhook:sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return key


class WebhookServer:
    def __init__(self, engine: Ingress, address: ListenAddress, report: Callable[[str, str], None]) -> None:
        self.engine = engine
        self.address = address
        self.host, self.port = address.host, address.port
        self.report = report
        self.counts: dict[tuple[str, int], int] = {}  # (channel, status) → answers; unknown channels as ""
        self._seen: NerveConfig | None = None  # the config the two maps below were made from
        self._open: dict[str, ChannelConfig] = {}  # channel → its settings, for the channels open to webhooks
        self._listeners: dict[str, list[str]] = {}  # channel → the senses whose active reflexes listen to it
        self._server: uvicorn.Server | None = None
        self._unset_warned: set[str] = set()
        self.bodies = BodyBudget(MAX_IN_FLIGHT, Siege("bytes", MAX_IN_FLIGHT, self._busy))
        # answer links (`nerve thread link`) share this listener: /answer/TOKEN
        self.links = LinkDesk(engine.home, lambda: engine.workflows.answer if engine.workflows is not None else None)

    def _busy(self, what: str, held: int, limit: int) -> None:
        self.engine.log(logrows.webhooks_busy(what, held, limit))
        shown = f"{limit} connections open" if what == "connections" else f"{held / 2**20:.0f} MiB of bodies arriving"
        self.report("warn", f"webhooks: {shown}, answering 503 to more until that falls to half")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PREFIX}"

    async def start(self) -> None:
        limits = self.engine.config.engine
        try:
            sock = socket.create_server((self.host, self.port), family=_family(self.host),
                                        backlog=min(limits.webhook_connections, 1024))
        except OSError as exc:
            raise NerveError(f"webhooks {self.host}:{self.port}: cannot listen there ({exc.strerror or exc}); "
                             "pick another port, e.g. --webhooks 127.0.0.1:8788") from None
        self.port = sock.getsockname()[1]
        protocol = type("BoundedHTTP", (BoundedHTTP,), {
            "max_connections": limits.webhook_connections, "request_timeout": limits.webhook_timeout,
            "siege": Siege("connections", limits.webhook_connections, self._busy)})
        config = uvicorn.Config(self._asgi, interface="asgi3", http=protocol, lifespan="off", log_config=None, access_log=False,
                                timeout_keep_alive=int(KEEP_ALIVE), timeout_graceful_shutdown=5,
                                server_header=False, date_header=False, proxy_headers=False)
        config.load()
        logging.getLogger("uvicorn.error").setLevel(logging.ERROR)  # a malformed request is answered, not logged
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        # startup(), not serve(): serve() would take over SIGINT/SIGTERM and poll every 100 ms; the engine owns both
        await server.startup(sockets=[sock])
        self._server = server
        self._warn_about_secrets()

    def _warn_about_secrets(self) -> None:
        open_ = self.engine.config.webhook_channels()
        if not open_:
            self.report("info", f"the HTTP listener on {self.url.rsplit('/emit/', 1)[0]} serves answer links "
                                "(/answer/TOKEN); no channel accepts webhooks yet: add `channels: {NAME: {webhook: "
                                "true}}` to nerve.yaml for them")
        for channel, settings in sorted(open_.items()):  # said now, not at the first post it must refuse
            if settings.secret_env is not None and not os.environ.get(settings.secret_env):
                self._unset_warned.add(channel)
                warning = (f"webhook channel {channel}: ${settings.secret_env} is not set in the engine's "
                           "environment, so every post to it is answered 503; set it and restart the engine")
                self.report("error", warning)
                self.engine.log(logrows.warning("webhooks", warning))
        if not self.address.loopback:
            unsigned = sorted(n for n, c in open_.items() if c.secret_env is None)
            if unsigned:
                warning = (f"webhooks listen on {self.host} (not loopback): channel(s) {', '.join(unsigned)} have "
                           f"no secret_env, so anyone who reaches {self.host}:{self.port} can post to them")
                self.report("warn", warning)
                self.engine.log(logrows.warning("webhooks", warning))

    async def close(self) -> None:
        """Stop accepting; answer what is in flight (each answer waits for its commit)."""
        if self._server is not None:
            self._server.force_exit = False
            await self._server.shutdown()
            self._server = None

    # the ASGI app ---------------------------------------------------------------------------
    async def _asgi(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("path", "").startswith(LINKS):
            await self.links(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            answer = await self.answer(request)
        except ClientDisconnect:
            return  # the client left (or the request timed out mid-body): nothing to answer, nothing stored
        headers = {"Allow": "POST"} if answer.status == 405 else {"Retry-After": RETRY_AFTER} if answer.retry else None
        body = orjson.dumps(answer.document)
        await Response(body, answer.status, headers, media_type="application/json")(scope, receive, send)

    async def answer(self, request: Request) -> Answer:
        """Everything a post gets is decided here, in the order the module docstring lists."""
        path = request.url.path
        channel = path[len(PREFIX):] if path.startswith(PREFIX) else ""
        settings = self._channels().get(channel) if channel else None
        answer = await self._answer(request, channel, settings)
        counted = channel if settings is not None else ""
        self.counts[(counted, answer.status)] = self.counts.get((counted, answer.status), 0) + 1
        return answer

    async def _answer(self, request: Request, channel: str, settings: ChannelConfig | None) -> Answer:
        if settings is None:
            what = f"channel {channel!r} does not accept webhooks" if channel else "nothing is served here"
            return refused(404, f"{what}; post to {PREFIX}CHANNEL for a channel with `webhook: true` under "
                                "`channels:` in nerve.yaml")
        if request.method != "POST":
            return refused(405, f"{PREFIX}{channel} takes POST with a JSON body")
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY:
            return refused(413, payload_too_large(int(length), "the request body is"))
        secret = self._secret(channel, settings, request)
        if isinstance(secret, Answer):  # no secret to check with, or no signature to check: the body is not read
            return secret
        held = bytearray()
        try:
            problem = await _read_body(request, held, self.bodies)
            if problem is not None:
                return problem
            return await self._verified(channel, settings, request, held, secret)
        finally:
            self.bodies.give_back(len(held))

    async def _verified(self, channel: str, settings: ChannelConfig, request: Request, body: bytearray,
                        secret: bytes | None) -> Answer:
        if secret is not None and not signature_ok(secret, body, request.headers.get(settings.signature_header)):
            return refused(401, f"a wrong {settings.signature_header} header: expected sha256= and the hex "
                                f"HMAC-SHA256 of the body under ${settings.secret_env}; nothing was stored")
        try:
            payload = await _parse(body)
        except orjson.JSONDecodeError as exc:
            return refused(400, f"the body is not JSON ({exc}); send it with Content-Type: application/json "
                                "(for GitHub: the webhook's content type `application/json`)")
        # a W3C traceparent continues the sender's trace; a malformed one is ignored, as the standard says
        traceparent = request.headers.get("traceparent")
        traceparent = traceparent if traceparent is not None and traceparent_problem(traceparent) is None else None
        key = body_key(channel, settings, payload) or delivery_key(channel, settings, request.headers)
        if settings.keep_headers:
            kept = {name: request.headers[name] for name in settings.keep_headers if name in request.headers}
            payload = {"headers": kept, "body": payload}
        return await self._store(channel, payload, key, traceparent)

    def _secret(self, channel: str, settings: ChannelConfig, request: Request) -> bytes | Answer | None:
        """The channel's secret (None: it takes unsigned posts), or the answer when a post cannot be verified."""
        if settings.secret_env is None:
            return None
        secret = os.environ.get(settings.secret_env)
        if not secret:
            if channel not in self._unset_warned:
                self._unset_warned.add(channel)
                self.report("error", f"webhook channel {channel}: ${settings.secret_env} is not set in the engine's "
                                     "environment, so no post can be verified; set it and restart the engine")
            return refused(503, f"channel {channel!r} cannot verify signatures: its secret "
                                f"${settings.secret_env} is not set where the engine runs")
        if request.headers.get(settings.signature_header) is None:
            return refused(401, f"no {settings.signature_header} header: expected sha256= and the hex HMAC-SHA256 "
                                f"of the body under ${settings.secret_env}; nothing was stored")
        return secret.encode()

    async def _store(self, channel: str, payload: Any, key: str | None, traceparent: str | None = None) -> Answer:
        try:
            event, woken = await self.engine.emit(channel, payload, key, via=VIA, traceparent=traceparent)
        except PayloadTooLarge as exc:  # its stored JSON, not the body, passed the limit (e.g. 1e5 → 100000.0)
            return refused(413, str(exc))
        except EventNotStored as exc:
            return refused(503, str(exc), ErrorType.STORAGE_ERROR)
        except EventError as exc:
            return refused(400, str(exc))
        return Answer(200 if event.duplicate else 202, emit_document(
            channel, woken, event_id=event.id, stored_ms=event.ts, delivered="now",
            listeners=self._heard_by(channel), duplicate=event.duplicate))

    def _channels(self) -> dict[str, ChannelConfig]:
        """The open channels, worked out again only when the engine's config changed (not at every post)."""
        config = self.engine.config
        if config is not self._seen:
            self._seen, self._open = config, config.webhook_channels()
            listening: dict[str, set[str]] = {}
            for reflex in config.active_reflexes():
                for source in reflex.on:
                    listening.setdefault(source, set()).add(reflex.sense)
            self._listeners = {channel: sorted(senses) for channel, senses in listening.items()}
        return self._open

    def _heard_by(self, channel: str) -> list[str]:
        """The senses listening to `channel`: by its name, or by an `on:` pattern matching it."""
        heard = set(self._listeners.get(channel, []))
        for source, senses in self._listeners.items():
            if is_pattern(source) and pattern_matches(source, channel):
                heard.update(senses)
        return sorted(heard)


async def _read_body(request: Request, into: bytearray, budget: BodyBudget) -> Answer | None:
    """Read the whole body into `into`, each chunk counted against `budget` before it is kept; the answer
    as soon as the body passes MAX_BODY (a chunked body has no Content-Length) or the budget is spent."""
    async for chunk in request.stream():
        if len(into) + len(chunk) > MAX_BODY:
            return refused(413, f"the request body is over {MAX_BODY:,} bytes (no spacing makes that much JSON fit "
                                f"{MAX_PAYLOAD:,}); nothing was stored")
        if not budget.take(len(chunk)):
            busy = refused(503, f"the engine is receiving {budget.limit / 2**20:.0f} MiB of request bodies at once; "
                                "retry shortly; nothing was stored")
            return Answer(busy.status, busy.document, retry=True)
        into.extend(chunk)
    return None


async def _parse(body: bytes | bytearray) -> Any:
    if len(body) <= PARSE_OFF_LOOP:
        return orjson.loads(body)
    return await asyncio.get_running_loop().run_in_executor(None, orjson.loads, body)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class BoundedHTTP(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools: a C parser, about a third less of the loop's CPU per post than
    h11's pure Python) with the bounds it lacks: how many connections, how long a request may take to arrive
    (uvicorn times out only idle keep-alive connections), and how large its head may be."""

    max_connections = 256  # the server makes a subclass with its own limits
    request_timeout = 10.0  # seconds from a request's first byte (or the connection's start) to its last
    siege: Siege | None = None  # told when the cap is reached, and as connections close
    _deadline: asyncio.TimerHandle | None = None
    # bytes of the request line and headers being read (None: none is), counted twice over: as they arrive, for
    # a head that never ends (a read in which one request ended and the next began is not counted: the parser
    # does not say where the next began), and from the parser's own pieces, for a head read at once
    _head: int | None = None
    _parsed = 0  # the line's and headers' bytes the parser has handed over
    _began = False  # a request began in the read being handled
    _ended = False  # a request ended in it
    _refused = False  # answered 431: the parser's error that follows is not answered again

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            self.transport = transport
            _close_with(transport, _BUSY, f"{self.max_connections} connections are open; retry shortly")
            if self.siege is not None:
                self.siege.reached(len(self.connections))
            return
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._deadline is None:  # the first bytes of the next request on a keep-alive connection
            self._arm()
        self._began = self._ended = False
        super().data_received(data)
        if self._head is not None and not (self._began and self._ended):
            self._head += len(data)
            if self._head > MAX_HEAD:
                self._refuse_head()

    def on_message_begin(self) -> None:
        self._head, self._parsed, self._began = 0, 0, True
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._parsed += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed += len(name) + len(value) + 4  # with its ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head = None
        if self._parsed > MAX_HEAD:
            self._refuse_head()
            raise _HeadTooLarge  # stops the parser (uvicorn catches its error: send_400_response is quiet now)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._ended = True
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:
            super().send_400_response(msg)

    def _refuse_head(self) -> None:
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._disarm()
        _close_with(self.transport, _HEAD_TOO_LARGE, f"the request's line and headers passed {MAX_HEAD} bytes; "
                                                     "nothing was stored")

    def on_response_complete(self) -> None:
        self._disarm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        if self.siege is not None:
            self.siege.held(len(self.connections))

    def _arm(self) -> None:
        self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._head is not None or self.cycle is None:  # its line and headers are not all here
            _close_with(self.transport, _SLOW, f"the request did not arrive within {self.request_timeout:g}s")
            return
        cycle = self.cycle
        if cycle.more_body and not cycle.response_started and not cycle.response_complete:
            self.transport.close()  # mid-body: the app sees the client gone and stores nothing
        # else it arrived whole: the answer waits for its commit, which is not the client's doing


class _HeadTooLarge(Exception):
    """Raised in the parser's callback to stop it once a request's head was refused."""


def _close_with(transport: asyncio.BaseTransport, template: bytes, message: str) -> None:
    body = orjson.dumps(error_docs.error(ErrorType.WEBHOOK_REFUSED, message, 1))
    transport.write(template % (len(body), body))  # type: ignore[attr-defined]
    transport.close()
