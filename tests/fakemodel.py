"""Model endpoints on loopback for the real coding-agent harnesses: every turn answered "done", requests recorded.

- `FakeModel`: OpenAI's Responses API (what Codex calls, `POST {base_url}/responses`): server-sent events
  `response.created`, `response.output_item.done` (one assistant message), `response.completed`, each
  `event: TYPE` and `data: JSON`, as the Codex SDK's own test proxy answers.
- `FakeAnthropic`: Anthropic's Messages API (what Claude Code calls, `POST {ANTHROPIC_BASE_URL}/v1/messages`):
  streamed `message_start`, a text block "done", `message_delta` (end_turn), `message_stop`, or the whole
  message when not streamed.
- `FakeChat`: OpenAI's Chat Completions API (what llm's OpenAI chat models call): a tool call when tools are
  offered and a rule picks one, else text.

Anything else is a 404.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class _Endpoint:
    """One POST path on a loopback HTTP server; `answer(body, n)` gives (content type, bytes) for request n."""

    path = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if not self.path.split("?")[0].rstrip("/").endswith(owner.path):
                    self.send_response(404)
                    self.end_headers()
                    return
                owner.requests.append(body)
                kind, data = owner.answer(body, len(owner.requests))
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    answer: Callable[[dict[str, Any], int], tuple[str, bytes]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _sse(events: list[tuple[str, dict]]) -> tuple[str, bytes]:
    return "text/event-stream", "".join(f"event: {name}\ndata: {json.dumps(e)}\n\n" for name, e in events).encode()


class FakeModel(_Endpoint):
    path = "/responses"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, body: dict[str, Any], n: int) -> tuple[str, bytes]:
        usage = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1, "output_tokens_details": None,
                 "total_tokens": 2}
        return _sse([(e["type"], e) for e in (
            {"type": "response.created", "response": {"id": f"resp_{n}"}},
            {"type": "response.output_item.done", "item": {"type": "message", "role": "assistant", "id": f"msg_{n}",
                                                            "content": [{"type": "output_text", "text": "done"}]}},
            {"type": "response.completed", "response": {"id": f"resp_{n}", "usage": usage}})])

    def user_texts(self) -> list[str]:
        """The last user message of each request: what each turn was started with."""
        out = []
        for request in self.requests:
            texts = [part.get("text", "") for item in request.get("input", []) if isinstance(item, dict)
                     and item.get("role") == "user" for part in item.get("content", []) if isinstance(part, dict)]
            out.append(texts[-1] if texts else "")
        return out


class FakeAnthropic(_Endpoint):
    path = "/v1/messages"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, body: dict[str, Any], n: int) -> tuple[str, bytes]:
        message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 1, "output_tokens": 1}}
        if not body.get("stream"):
            whole = {**message, "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
            return "application/json", json.dumps(whole).encode()
        return _sse([
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "done"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"})])


class FakeChat(_Endpoint):
    """OpenAI's Chat Completions API (what llm's OpenAI chat models call, `POST {OPENAI_BASE_URL}/chat/completions`):
    a request that offers tools is answered with the call `pick(body)` chooses (a tool name and its arguments; None
    for plain text), a request whose last message is a tool's result with text; streamed as chunks when asked."""

    path = "/chat/completions"

    def __init__(self, pick: Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None] | None = None,
                 text: str = "done") -> None:
        self.pick = pick
        self.text = text
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, body: dict[str, Any], n: int) -> tuple[str, bytes]:
        messages = body.get("messages") or [{}]
        call = None
        if body.get("tools") and messages[-1].get("role") != "tool" and self.pick is not None:
            call = self.pick(body)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        base = {"id": f"chatcmpl-{n}", "created": 0, "model": body.get("model", "fake")}
        tool_calls = [{"index": 0, "id": f"call_{n}", "type": "function",
                       "function": {"name": call[0], "arguments": json.dumps(call[1])}}] if call else None
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": None if call else self.text, "tool_calls": tool_calls}
            whole = {**base, "object": "chat.completion", "usage": usage,
                     "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
            return "application/json", json.dumps(whole).encode()
        delta: dict[str, Any] = {"role": "assistant", **({"tool_calls": tool_calls} if call else {"content": self.text})}
        chunks = [{**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                           "finish_reason": None}]},
                  {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {},
                                                                           "finish_reason": finish}]},
                  {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}]
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return "text/event-stream", data.encode()
