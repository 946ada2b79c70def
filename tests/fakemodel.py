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
