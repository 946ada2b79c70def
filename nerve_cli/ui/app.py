"""The console's pages: Starlette routes, rendered server-side by Jinja2 (autoescaped), live through SSE.

Pages: `/` (senses with state, freshness, backlog; threads; what waits for a
person), `/senses/NAME` (its chart, recent signals, tables, runs and errors),
`/threads` and `/threads/RUN` (rounds, messages, tool calls, waits, answer
forms), `/inbox` (everything waiting for a person, answered there), `/logs`
(filters), `/mesh` (the reflex graph). `/events` is a server-sent event stream
that says `update` whenever the log gained a row; each page's live part
(`hx-trigger="sse:update"`) fetches its fragment again. Answers go through the
one answer path (`ops.workflows.gates.answer_thread`, via `nerve ui`): through
the engine, or written for its next start when it is stopped. htmx, its SSE
extension and uPlot are served from the package (`static/vendor`): the console
works offline.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.contract.times import iso
from nerve_cli.errors import NerveError
from nerve_cli.instance.git import person
from nerve_cli.ops.workflows.gates import answer_thread
from nerve_cli.ui.data import Reader
from nerve_cli.ui.forms import form_fields, read_answer
from nerve_cli.ui.graph import BOX_H, BOX_W, layout
from nerve_cli.ui.security import Gate, Session, csrf_ok
from nerve_cli.vocab import states

VIA = "nerve ui"
SSE_EVERY = 0.1  # seconds between two looks at the log's newest id
SSE_HEARTBEAT = 15.0


def build(home: Path, token: str, hosts: list[str]) -> Gate:
    """The console as an ASGI app, behind its gate (Host, token, CSRF, Origin)."""
    reader = Reader(home)
    env = Environment(loader=PackageLoader("nerve_cli.ui"), autoescape=select_autoescape(["html"]))
    env.filters["when"] = lambda ms: iso(int(ms)) if isinstance(ms, (int, float)) else ""
    env.filters["js"] = lambda value: orjson.dumps(value).decode()
    env.globals["form_fields"] = form_fields
    who = person(home)

    def page(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        session: Session = request.scope["state"]["session"]
        text = env.get_template(name).render(csrf=session.csrf, path=request.url.path, who=who, **context)
        return HTMLResponse(text, code)

    async def dashboard(request: Request) -> Response:
        status, threads = await asyncio.gather(run_in_threadpool(reader.status), run_in_threadpool(reader.threads))
        fragment = request.url.path.startswith("/fragment/")
        backlog = {listener["name"]: listener["backlog"] for listener in status.get("listeners") or []}
        return page(request, "dashboard_live.html" if fragment else "dashboard.html", status=status, backlog=backlog,
                    threads=threads[:50], waiting=[t for t in threads if t["status"] == states.ThreadStatus.WAITING])

    async def sense(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            detail = await run_in_threadpool(reader.sense, name)
        except NerveError as exc:
            return page(request, "error.html", code=404, message=str(exc))
        return page(request, "sense.html", sense=detail)

    async def chart(request: Request) -> Response:
        data = await run_in_threadpool(reader.chart, request.path_params["name"], request.query_params.get("column"))
        return JSONResponse(data)

    async def threads(request: Request) -> Response:
        status = request.query_params.get("status") or None
        rows = await run_in_threadpool(reader.threads, status)
        return page(request, "threads.html", threads=rows, status=status)

    async def thread(request: Request) -> Response:
        try:
            shown = await run_in_threadpool(reader.thread, request.path_params["run_id"])
        except NerveError as exc:
            return page(request, "error.html", code=404, message=str(exc))
        name = "thread_live.html" if request.url.path.startswith("/fragment/") else "thread.html"
        return page(request, name, thread=shown)

    async def inbox(request: Request) -> Response:
        waiting = await run_in_threadpool(reader.inbox)
        name = "inbox_live.html" if request.url.path.startswith("/fragment/") else "inbox.html"
        return page(request, name, waiting=waiting)

    async def answer(request: Request) -> Response:
        session: Session = request.scope["state"]["session"]
        form = await request.form()
        if not csrf_ok(session, str(form.get("csrf") or "")):
            return page(request, "error.html", code=403, message="this form is stale or not this console's (CSRF): "
                                                            "reload the page and answer again")
        run_id = request.path_params["run_id"]
        decision = str(form.get("decision") or "")
        question = str(form.get("question") or "") or None
        note = str(form.get("note") or "").strip() or None
        try:
            data = read_answer({k: str(v) for k, v in form.items()}) if decision == states.Decision.APPROVE else NO_ANSWER
            done = await run_in_threadpool(answer_thread, home, run_id, decision, note, VIA, data, question)
        except (NerveError, ValueError) as exc:
            return page(request, "error.html", code=422, message=str(exc), back=f"/threads/{run_id}")
        back = str(form.get("back") or f"/threads/{run_id}")
        if request.headers.get("hx-request"):
            return page(request, "answered.html", done=done, run_id=run_id)
        return Response(status_code=303, headers={"Location": back if back.startswith("/") else "/"})

    async def logs(request: Request) -> Response:
        q = request.query_params
        rows = await run_in_threadpool(reader.logs, q.get("source"), q.get("type"), q.get("ref"))
        return page(request, "logs.html", rows=rows, source=q.get("source") or "", type=q.get("type") or "",
                    ref=q.get("ref") or "")

    async def mesh(request: Request) -> Response:
        try:
            graph = await run_in_threadpool(reader.mesh)
        except NerveError as exc:
            return page(request, "error.html", code=500, message=str(exc))
        boxes, lines, width, height = layout(graph["nodes"], graph["edges"])
        return page(request, "mesh.html", mesh=graph, boxes=boxes, lines=lines, width=width, height=height,
                    box_w=BOX_W, box_h=BOX_H)

    async def events(request: Request) -> Response:
        async def stream() -> Any:
            last, quiet = None, 0.0
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                stamp = await run_in_threadpool(reader.change_stamp)
                if stamp != last:
                    if last is not None:
                        yield f"event: update\ndata: {stamp}\n\n"
                    last, quiet = stamp, 0.0
                elif quiet >= SSE_HEARTBEAT:
                    yield ": still here\n\n"
                    quiet = 0.0
                await asyncio.sleep(SSE_EVERY)
                quiet += SSE_EVERY

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    static = StaticFiles(directory=str(Path(__file__).parent / "static"))
    routes = [
        Route("/", dashboard), Route("/fragment/dashboard", dashboard),
        Route("/senses/{name}", sense), Route("/senses/{name}/chart.json", chart),
        Route("/threads", threads), Route("/threads/{run_id}", thread), Route("/fragment/threads/{run_id}", thread),
        Route("/threads/{run_id}/answer", answer, methods=["POST"]),
        Route("/inbox", inbox), Route("/fragment/inbox", inbox),
        Route("/logs", logs), Route("/mesh", mesh), Route("/events", events),
        Mount("/static", static, name="static"),
    ]
    app = Starlette(routes=routes)
    return Gate(_headers(app), token, hosts)


def _headers(app: Any) -> Any:
    """Every answer says: no framing by other sites, no sniffing, scripts only from here."""
    extra = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
             (b"referrer-policy", b"same-origin"),
             (b"content-security-policy", b"default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")]

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await app(scope, receive, sending)

    return wrapped
