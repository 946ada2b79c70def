"""A model endpoint on loopback for the real coding-agent harnesses: answers every turn "done", records requests.

OpenAI's Responses API (what Codex calls, `POST {base_url}/responses`): a
stream of server-sent events `response.created`, `response.output_item.done`
(one assistant message), `response.completed`, each `event: TYPE` and `data:
JSON`, as the Codex SDK's own test proxy answers. Anything else is a 404.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeModel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if not self.path.rstrip("/").endswith("/responses"):
                    self.send_response(404)
                    self.end_headers()
                    return
                owner.requests.append(json.loads(body or b"{}"))
                n = len(owner.requests)
                events = [
                    {"type": "response.created", "response": {"id": f"resp_{n}"}},
                    {"type": "response.output_item.done", "item": {
                        "type": "message", "role": "assistant", "id": f"msg_{n}",
                        "content": [{"type": "output_text", "text": "done"}]}},
                    {"type": "response.completed", "response": {"id": f"resp_{n}", "usage": {
                        "input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
                        "output_tokens_details": None, "total_tokens": 2}}},
                ]
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def user_texts(self) -> list[str]:
        """The last user message of each request: what each turn was started with."""
        out = []
        for request in self.requests:
            texts = [part.get("text", "") for item in request.get("input", []) if isinstance(item, dict)
                     and item.get("role") == "user" for part in item.get("content", []) if isinstance(part, dict)]
            out.append(texts[-1] if texts else "")
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class FakeAnthropic:
    """Anthropic's Messages API (what Claude Code calls, `POST {ANTHROPIC_BASE_URL}/v1/messages`, streamed):
    `message_start`, a text block "done", `message_delta` (end_turn), `message_stop`; records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    self.send_response(404)
                    self.end_headers()
                    return
                owner.requests.append(body)
                message = {"id": f"msg_{len(owner.requests)}", "type": "message", "role": "assistant",
                           "model": body.get("model", "fake"), "content": [], "stop_reason": None,
                           "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
                if not body.get("stream"):
                    data = json.dumps({**message, "content": [{"type": "text", "text": "done"}],
                                       "stop_reason": "end_turn"}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                events = [("message_start", {"type": "message_start", "message": message}),
                          ("content_block_start", {"type": "content_block_start", "index": 0,
                                                   "content_block": {"type": "text", "text": ""}}),
                          ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": "done"}}),
                          ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                          ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                                 "stop_sequence": None},
                                             "usage": {"output_tokens": 1}}),
                          ("message_stop", {"type": "message_stop"})]
                data = "".join(f"event: {n}\ndata: {json.dumps(e)}\n\n" for n, e in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
