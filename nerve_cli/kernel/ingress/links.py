"""Answer links on the engine's HTTP listener: `GET|POST /answer/TOKEN` (see `store.links` for the token).

GET shows the thread's open question(s) the link answers — the text, the tool
call or step it is about, irreversible or not — and a form: a note, the
answer's JSON when the question declares a JSON Schema (shown beside it), and
approve or reject. POST (a form, or JSON `{"decision", "note", "answer"}`)
answers through the one answer path (`store.answers`, via `link`, by the
person the link was made for) and the thread resumes once nothing is left open.

Each request is decided here, in this order: 401 a token that is malformed,
tampered or made with a rotated key; 410 an expired one; 409 one used
already, or a question settled meanwhile (by another answer); 405 another
method; 413 a body over `MAX_BODY`; 400 a body that does not read; 422 an
answer the answer path refuses (its reason; the link stays usable); 200 the
page, or the answer taken. A page is HTML unless the request accepts only
JSON. Starlette is imported here, and this module only with the webhooks one.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.automaton.questions import Question, open_questions
from nerve_cli.clock import now_ms
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.store import links
from nerve_cli.store.answers import Answer
from nerve_cli.store.logs import workflow_runs
from nerve_cli.store.runs import persisted_chain
from nerve_cli.vocab import states
from nerve_cli.vocab.states import ThreadStatus

PREFIX = "/answer/"
VIA = "link"
MAX_BODY = 256 * 1024  # a note and an answer's JSON

AnswerFn = Callable[[Answer], dict[str, Any]]  # the engine's answer path (its workflow manager's `answer`)


class LinkDesk:
    """The `/answer/` routes: `__call__` is an ASGI app."""

    def __init__(self, home: Path, answer: Callable[[], AnswerFn | None]) -> None:
        self.home = Path(home)
        self.answer = answer
        self.counts: dict[int, int] = {}  # status → answers given

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        request = Request(scope, receive)
        try:
            status, title, body, doc = await self.decide(request)
        except ClientDisconnect:
            return
        self.counts[status] = self.counts.get(status, 0) + 1
        accept = request.headers.get("accept", "")
        headers = {"Allow": "GET, POST"} if status == 405 else {}
        headers.update({"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"})
        if "application/json" in accept and "text/html" not in accept:
            response = Response(orjson.dumps({"status": status, **doc}), status, headers, media_type="application/json")
        else:
            response = Response(_page(title, body), status, headers, media_type="text/html")
        await response(scope, receive, send)

    async def decide(self, request: Request) -> tuple[int, str, str, dict[str, Any]]:
        """(status, title, HTML body, JSON document) in the order the module docstring lists."""
        token = request.url.path[len(PREFIX):]
        try:
            claims = links.check(self.home, token, time.time())
        except links.LinkRefused as exc:
            return exc.status, "Link refused", f"<p>{html.escape(str(exc))}</p>", {"error": str(exc)}
        questions = self._open(claims)
        if isinstance(questions, str):
            return 409, "Nothing to answer", f"<p>{html.escape(questions)}</p>", {"error": questions}
        if request.method == "GET":
            return 200, f"{claims.run_id} asks", _form(claims, questions), {
                "run_id": claims.run_id, "questions": [q.to_dict() for q in questions]}
        if request.method != "POST":
            return 405, "Method not allowed", "<p>An answer link takes GET and POST.</p>", {"error": "GET or POST"}
        return await self._post(request, claims)

    def _open(self, claims: links.Claims) -> list[Question] | str:
        """The open questions the link answers, or why there are none."""
        logs_db = Layout(self.home).logs_db
        rows = [r for r in workflow_runs(logs_db) if r["run_id"] == claims.run_id]
        if not rows or rows[0]["status"] != ThreadStatus.WAITING:
            return f"{claims.run_id} is {rows[0]['status'] if rows else 'gone'}: it waits for nobody's answer now"
        try:
            found = open_questions(persisted_chain(logs_db, claims.run_id)) or []
        except ValueError as exc:
            return f"{claims.run_id} cannot be read: {exc}"
        if claims.question is not None:
            found = [q for q in found if q.id == claims.question]
            if not found:
                return f"{claims.run_id}'s question {claims.question} was answered already"
        return found or f"{claims.run_id} waits for no person's answer"

    async def _post(self, request: Request, claims: links.Claims) -> tuple[int, str, str, dict[str, Any]]:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return 413, "Too large", f"<p>An answer is at most {MAX_BODY:,} bytes.</p>", {"error": "too large"}
        try:
            form = _fields(request.headers.get("content-type", ""), bytes(body))
        except ValueError as exc:
            return 400, "Not read", f"<p>{html.escape(str(exc))}</p>", {"error": str(exc)}
        answer_fn = self.answer()
        if answer_fn is None:
            return 503, "Unavailable", "<p>Workflows are not available in this engine.</p>", {"error": "no workflows"}
        given = Answer(claims.run_id, form["decision"], claims.by, VIA, form["note"], form["answer"], claims.question)
        try:
            done = answer_fn(given)
        except NerveError as exc:  # refused by the answer path: nothing written, the link stays usable
            return 422, "Not taken", f"<p>{html.escape(str(exc))}</p>", {"error": str(exc)}
        links.spend(self.home, claims, now_ms())
        verb = "approved" if given.decision == states.Decision.APPROVE else "rejected"
        then = ("it resumes now" if done.get("resumes") else
                f"it waits on for {', '.join(done.get('open') or [])}")
        return 200, f"{claims.run_id} {verb}", f"<p>Thank you: {html.escape(claims.run_id)} {verb}; {then}.</p>", done


def _fields(content_type: str, body: bytes) -> dict[str, Any]:
    """decision, note and answer from a form or a JSON body; ValueError naming what is wrong."""
    if content_type.startswith("application/json"):
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError('expected {"decision": "approve"|"reject", "note"?, "answer"?}')
        decision, note, answer = data.get("decision"), data.get("note"), data.get("answer", NO_ANSWER)
    else:
        fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        decision, note = fields.get("decision"), fields.get("note") or None
        text = (fields.get("answer") or "").strip()
        try:
            answer = orjson.loads(text) if text else NO_ANSWER
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"the answer is not JSON: {exc}") from None
    if decision not in (states.Decision.APPROVE, states.Decision.REJECT):
        raise ValueError('decision must be "approve" or "reject"')
    if note is not None and not isinstance(note, str):
        raise ValueError("the note must be text")
    return {"decision": decision, "note": note, "answer": answer}


def _form(claims: links.Claims, questions: list[Question]) -> str:
    parts = [f"<p class=who>For {html.escape(claims.by)} · {html.escape(claims.run_id)}</p>"]
    schema = None
    for q in questions:
        parts.append(f"<section><h2>{html.escape(q.id)}</h2><pre>{html.escape(q.text)}</pre>")
        if q.call is not None:
            args = orjson.dumps(q.call.get("arguments") or {}).decode()
            parts.append(f"<p>Tool call: <code>{html.escape(str(q.call.get('name')))}({html.escape(args)})</code></p>")
        if q.step is not None:
            parts.append(f"<p>Step: <code>{html.escape(q.step)}</code></p>")
        if q.irreversible:
            parts.append("<p class=warn>Irreversible: it cannot be taken back.</p>")
        schema = schema or q.schema
        parts.append("</section>")
    parts.append("<form method=post><label>Note <textarea name=note rows=3></textarea></label>")
    if schema is not None:
        shown = html.escape(orjson.dumps(schema, option=orjson.OPT_INDENT_2).decode())
        parts.append(f"<label>Answer (JSON matching this schema)<pre>{shown}</pre>"
                     "<textarea name=answer rows=4></textarea></label>")
    parts.append("<button name=decision value=approve>Approve</button> "
                 "<button name=decision value=reject class=no>Reject</button></form>")
    return "".join(parts)


def _page(title: str, body: str) -> str:
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)} · nerve</title><style>"
            "body{font:16px/1.4 system-ui,sans-serif;max-width:40rem;margin:1rem auto;padding:0 1rem}"
            "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}textarea{width:100%;box-sizing:border-box}"
            "label{display:block;margin:.5rem 0}button{font-size:1rem;padding:.5rem 1.5rem;margin:.5rem 0}"
            ".no{background:#fdd}.warn{color:#a00;font-weight:bold}.who{color:#666}"
            f"</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
