"""The console's gate: who may look, and which requests may change anything.

- **Host**: a request whose Host is not one this console answers to (its own
  address, `localhost`, `127.0.0.1`, `[::1]`, or `--allow-host` names) is
  refused 400 before anything else: a page of another site resolving its name
  to this machine (DNS rebinding) reads nothing.
- **Token**: the console prints a URL with `?token=...` when it starts (as
  Jupyter does); the token is kept in `data/ui.token` (0600), so a service's
  console keeps its URL. Opening any page with the token starts a session: a
  random id in an HttpOnly, SameSite=Strict cookie. Without a session (or a
  `Authorization: Bearer TOKEN` header) a page is 401, and nothing else.
- **CSRF and Origin**: every form carries the session's CSRF token; a POST
  without it, or whose Origin (else Referer) is not this console's, is 403.

Sessions live in the console's memory: a restart asks for the token again.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html import escape
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from nerve_cli.home import Layout
from nerve_cli.store.sqlitefile import private_dir

COOKIE = "nerve_ui"
TOKEN_FILE = "ui.token"
MAX_SESSIONS = 1000


def console_token(home: Path, rotate: bool = False) -> str:
    """The console's token: read from data/ui.token, made (0600) on first use or when `rotate`."""
    path = Layout(Path(home)).data / TOKEN_FILE
    if not rotate:
        try:
            token = path.read_text().strip()
            if len(token) >= 16:
                return token
        except FileNotFoundError:
            pass
    private_dir(path.parent)
    token = secrets.token_urlsafe(24)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)
    return token


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))


class Gate:
    """An ASGI middleware around the console's app (see the module docstring for what it decides)."""

    def __init__(self, app: Callable, token: str, hosts: Iterable[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = {h.lower() for h in hosts}
        self.sessions: dict[str, Session] = {}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "").lower()
        if _hostname(host) not in self.hosts:
            await _plain(send, 400, f"this console does not answer to the host {host!r} (its own address, or "
                                    "one given with nerve ui --allow-host)")
            return
        session_id, session = self._session(headers)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if session is None and self._token_ok(query.get("token", [""])[0], headers):
            session = Session()
            if "token" in query:  # the token leaves the address bar: back to the same page, with the cookie
                session_id = secrets.token_urlsafe(24)
                if len(self.sessions) >= MAX_SESSIONS:
                    self.sessions.pop(next(iter(self.sessions)))
                self.sessions[session_id] = session
                await _redirect(send, scope.get("path", "/"), session_id)
                return
        if scope.get("path", "").startswith("/static/"):
            await self.app(scope, receive, send)
            return
        if session is None:
            await _plain(send, 401, "open the address `nerve ui` printed (it carries ?token=...), or send "
                                    "Authorization: Bearer TOKEN (the token is in the instance's data/ui.token)",
                         html=True)
            return
        if scope["method"] not in ("GET", "HEAD") and not self._same_origin(headers, host):
            await _plain(send, 403, "a cross-site request: its Origin is not this console's")
            return
        scope.setdefault("state", {})["session"] = session
        await self.app(scope, receive, send)

    def _session(self, headers: dict[str, str]) -> tuple[str | None, Session | None]:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no session
            return None, None
        morsel = cookie.get(COOKIE)
        if morsel is None:
            return None, None
        return morsel.value, self.sessions.get(morsel.value)

    def _token_ok(self, given: str, headers: dict[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def _same_origin(self, headers: dict[str, str], host: str) -> bool:
        origin = headers.get("origin") or headers.get("referer")
        if not origin or origin == "null":
            return False
        parts = urlsplit(origin)
        return parts.netloc.lower() == host


def csrf_ok(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf.encode(), str(given).encode())


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if ":" in host else host


async def _plain(send: Callable, status: int, text: str, html: bool = False) -> None:
    if html:
        body = (f"<!doctype html><meta name=viewport content='width=device-width'><title>nerve ui</title>"
                f"<h1>{status}</h1><p>{escape(text)}</p>").encode()
        kind = b"text/html; charset=utf-8"
    else:
        body, kind = text.encode(), b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Callable, path: str, session_id: str) -> None:
    cookie = f"{COOKIE}={session_id}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", (path or "/").encode()), (b"set-cookie", cookie.encode()),
                            (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})
