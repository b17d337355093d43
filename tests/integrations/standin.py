"""An OpenAI-compatible chat-completions stand-in: scripted replies per model, on 127.0.0.1.

`StandInServer({"model-a": ["reply 1", "reply 2"], ...})` serves `POST .../chat/completions`
from a thread in the test process (port 0, so parallel runs never collide): each request for
model M gets M's next scripted reply, and is kept in `requests` for assertions. A request for a
model with no reply left is answered 500, so a test that asks more than it scripted fails
loudly instead of hanging.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StandInServer:
    def __init__(self, replies: Mapping[str, Iterable[str]]) -> None:
        self.replies = {model: deque(texts) for model, texts in replies.items()}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = server._answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        model = str(body.get("model", ""))
        with self._lock:
            self.requests.append({"path": path, "body": body})
            queue = self.replies.get(model)
            if not path.endswith("/chat/completions") or not queue:
                return 500, {"error": {"message": f"no scripted reply for {model!r} at {path}"}}
            text = queue.popleft()
        return 200, {
            "id": f"chatcmpl-standin-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["body"].get("model") == model]

    def __enter__(self) -> StandInServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
