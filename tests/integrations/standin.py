"""OpenAI-compatible chat-completions stand-ins on 127.0.0.1, for every test that needs a server.

- `ChatStandIn`: the server itself, from a thread in the test process (port 0, so parallel runs
  never collide). Every POST is kept in `requests` as `{"path", "headers" (lower-cased names),
  "body" (the JSON body)}`, then answered by the subclass's `respond(handler, body)`. Use it as a
  context manager (or call `close()`); it serves from construction on.
- `send_json(handler, status, payload)` writes one JSON response; `completion(text, model=...)`
  is the body of a successful chat completion, in the shape the `openai` client parses.
- `StandInServer({"model-a": ["reply 1", "reply 2"], ...})`: scripted replies per model; each
  request for model M gets M's next scripted reply. A request for a model with no reply left is
  answered 500, so a test that asks more than it scripted fails loudly instead of hanging.

Other tests subclass `ChatStandIn` for their own answers (fault injection in
`tests/agents/test_openai_backend.py`, a key-echoing 401 in `tests/agents/test_secret_redaction.py`).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(
    text: str,
    *,
    model: str,
    completion_id: str = "chatcmpl-standin",
    usage: tuple[int, int] = (1, 1),
) -> dict[str, Any]:
    """A finished chat completion answering `text`; `usage` is (prompt, completion) tokens."""
    prompt_tokens, completion_tokens = usage
    return {
        "id": completion_id,
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
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: Mapping[str, Any] | bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    """One complete response; `payload` bytes are sent as they are (to send broken JSON)."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)


class ChatStandIn:
    """A local HTTP server that records each POST and lets `respond` answer it."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server.lock:
                    server.requests.append({"path": self.path, "headers": headers, "body": body})
                server.respond(self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A short poll interval: `close()` waits for the serving loop to notice the shutdown.
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        """Answer one recorded request (called on the server's thread)."""
        raise NotImplementedError

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ChatStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StandInServer(ChatStandIn):
    """Scripted replies per model (see the module docstring)."""

    def __init__(self, replies: Mapping[str, Iterable[str]]) -> None:
        self.replies = {model: deque(texts) for model, texts in replies.items()}
        super().__init__()

    def __enter__(self) -> StandInServer:
        return self

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        with self.lock:
            queue = self.replies.get(model)
            text = queue.popleft() if queue and handler.path.endswith("/chat/completions") else None
            number = len(self.requests)
        if text is None:
            message = f"no scripted reply for {model!r} at {handler.path}"
            send_json(handler, 500, {"error": {"message": message}})
            return
        send_json(
            handler, 200, completion(text, model=model, completion_id=f"chatcmpl-standin-{number}")
        )

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["body"].get("model") == model]
