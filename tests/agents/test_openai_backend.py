"""Fault injection for `OpenAICompatBackend` against a local scripted HTTP server.

The server (`tests.integrations.standin.ChatStandIn`) answers each request with the next
scripted behaviour: a normal completion, an HTTP error (optionally with Retry-After), a slow
response (client timeout), a truncated JSON body, or a dropped connection. Sleeps between retries
go through an injectable function, so Retry-After and backoff are asserted on the values passed,
not on wall-clock time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

pytest.importorskip("openai")

from tomgym.agents.base import Turn  # noqa: E402
from tomgym.agents.llm import BackendError, LLMPolicy, make_llm_policy  # noqa: E402
from tomgym.agents.llm.backends.openai_compat import (  # noqa: E402
    OpenAICompatBackend,
    parse_retry_after,
)

from tests.integrations.standin import ChatStandIn, completion, send_json  # noqa: E402

SECRET = "sk-test-SECRET-do-not-leak-0123456789"
KEY_ENV = "TOMGYM_TEST_OPENAI_KEY"


def completion_body(text: str) -> bytes:
    return json.dumps(completion(text, model="test-model", usage=(11, 3))).encode()


class ScriptedServer(ChatStandIn):
    """A chat-completions server that plays a queue of behaviours, one per request."""

    def __init__(self) -> None:
        self.script: deque[tuple[Any, ...]] = deque()
        self.in_flight = 0
        self.max_in_flight = 0
        super().__init__()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            action = self.script.popleft() if self.script else ("ok", "default")
        try:
            self.play(handler, action, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    @staticmethod
    def play(
        handler: BaseHTTPRequestHandler, action: tuple[Any, ...], body: dict[str, Any]
    ) -> None:
        kind = action[0]
        if kind == "ok":
            text = action[1] if len(action) > 1 else "ok"
            if text == "echo":
                text = body["messages"][-1]["content"]
            delay = action[2] if len(action) > 2 else 0.0
            time.sleep(delay)
            send_json(handler, 200, completion_body(text))
        elif kind == "status":
            error = {"error": {"message": f"scripted {action[1]}"}}
            send_json(handler, action[1], error, action[2] if len(action) > 2 else None)
        elif kind == "slow":
            time.sleep(action[1])
            with contextlib.suppress(OSError):
                send_json(handler, 200, completion_body("too late"))
        elif kind == "truncated":
            send_json(handler, 200, completion_body("cut")[:40])
        elif kind == "short_body":
            # Promise more bytes than are sent, then hang up mid-body.
            payload = completion_body("cut")
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload[:30])
            handler.wfile.flush()
            handler.close_connection = True
        elif kind == "no_choices":
            send_json(handler, 200, {"id": "x", "choices": []})
        elif kind == "close":
            handler.close_connection = True
            handler.connection.close()
        else:
            raise AssertionError(f"unknown scripted action {kind}")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


class SleepRecorder:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_backend(server: ScriptedServer, sleeps: SleepRecorder, **kwargs: Any):
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key_env": KEY_ENV,
        "timeout": 5.0,
        "max_retries": 3,
        "sleep": sleeps,
    }
    options.update(kwargs)
    return OpenAICompatBackend("test-model", **options)


CHAT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]


def test_success_sends_key_params_and_counts_usage(server, api_key):
    sleeps = SleepRecorder()
    server.script.append(("ok", "fine"))
    backend = make_backend(server, sleeps, response_format_json=True)
    out = backend.generate([CHAT], temperature=0.3, top_p=0.9, max_new_tokens=7, seed=42)
    assert out == ["fine"]
    request = server.requests[0]
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"
    body = request["body"]
    assert body["model"] == "test-model"
    assert body["messages"] == CHAT
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        0.3,
        0.9,
        7,
        42,
    )
    assert body["response_format"] == {"type": "json_object"}
    assert backend.stats.retries == 0 and sleeps.calls == []
    assert (backend.stats.prompt_tokens, backend.stats.completion_tokens) == (11, 3)
    backend.close()


def test_5xx_retried_with_growing_jittered_backoff(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("status", 500), ("status", 503), ("ok", "recovered")])
    backend = make_backend(server, sleeps, backoff_base=0.5)
    assert backend.generate([CHAT], temperature=0, max_new_tokens=4) == ["recovered"]
    assert backend.stats.retries == 2
    assert len(server.requests) == 3
    assert len(sleeps.calls) == 2
    assert 0.25 <= sleeps.calls[0] <= 0.5  # equal jitter on 0.5 * 2**0
    assert 0.5 <= sleeps.calls[1] <= 1.0  # equal jitter on 0.5 * 2**1
    assert backend.stats.errors == {"HTTP 500": 1, "HTTP 503": 1}
    backend.close()


def test_429_respects_retry_after_seconds_and_ms(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend(
        [
            ("status", 429, {"Retry-After": "7"}),
            ("status", 429, {"retry-after-ms": "1500"}),
            ("ok", "after wait"),
        ]
    )
    backend = make_backend(server, sleeps)
    assert backend.generate([CHAT], temperature=0, max_new_tokens=4) == ["after wait"]
    assert sleeps.calls == [7.0, 1.5]
    assert backend.stats.retries == 2
    backend.close()


def test_retry_after_is_capped(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("status", 429, {"Retry-After": "100000"}), ("ok", "x")])
    backend = make_backend(server, sleeps, max_retry_after=12.0)
    backend.generate([CHAT], temperature=0, max_new_tokens=4)
    assert sleeps.calls == [12.0]
    backend.close()


def test_parse_retry_after_http_date():
    assert parse_retry_after(
        {"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0
    ) == (pytest.approx(10.0))
    assert parse_retry_after({"retry-after": "garbage"}) is None
    assert parse_retry_after({}) is None


def test_timeout_is_retried(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("slow", 1.5), ("ok", "quick")])
    backend = make_backend(server, sleeps, timeout=0.3)
    start = time.perf_counter()
    assert backend.generate([CHAT], temperature=0, max_new_tokens=4) == ["quick"]
    assert time.perf_counter() - start < 1.4  # the slow answer was not waited for
    assert backend.stats.retries == 1
    assert any(kind.startswith("timed out") for kind in backend.stats.errors)
    backend.close()


@pytest.mark.parametrize("fault", ["truncated", "short_body", "close", "no_choices"])
def test_malformed_and_dropped_responses_are_retried(server, api_key, fault):
    sleeps = SleepRecorder()
    server.script.extend([(fault,), ("ok", "good")])
    backend = make_backend(server, sleeps)
    assert backend.generate([CHAT], temperature=0, max_new_tokens=4) == ["good"]
    assert backend.stats.retries == 1
    assert backend.stats.failures == 0
    backend.close()


def test_final_failure_raises_clear_error(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("status", 502)] * 4)
    backend = make_backend(server, sleeps, max_retries=3)
    with pytest.raises(BackendError) as info:
        backend.generate([CHAT], temperature=0, max_new_tokens=4)
    message = str(info.value)
    assert server.base_url in message
    assert "HTTP 502" in message and "4 attempt(s)" in message
    assert backend.stats.retries == 3 and backend.stats.failures == 1
    assert len(server.requests) == 4
    backend.close()


def test_client_errors_are_not_retried(server, api_key):
    sleeps = SleepRecorder()
    server.script.append(("status", 400))
    backend = make_backend(server, sleeps)
    with pytest.raises(BackendError, match="HTTP 400"):
        backend.generate([CHAT], temperature=0, max_new_tokens=4)
    assert len(server.requests) == 1 and backend.stats.retries == 0 and sleeps.calls == []
    backend.close()


def test_fallback_answers_empty_and_counts(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("status", 500), ("status", 500)])
    backend = make_backend(server, sleeps, max_retries=1, on_failure="fallback")
    policy = LLMPolicy(backend, name="api", temperature=0.0, max_new_tokens=4)
    turn = Turn("g", "a", {"system": "s", "message": "m", "retry": 0, "side_question": 0})
    assert policy.act_batch([turn]) == [""]
    assert backend.stats.fallbacks == 1 and backend.stats.failures == 1
    assert backend.stats.retries == 1
    policy.close()


def test_concurrency_is_bounded_and_order_kept(server, api_key):
    sleeps = SleepRecorder()
    server.script.extend([("ok", "echo", 0.15)] * 6)
    backend = make_backend(server, sleeps, max_concurrency=2)
    chats = [[{"role": "user", "content": f"q{i}"}] for i in range(6)]
    assert backend.generate(chats, temperature=0, max_new_tokens=4) == [f"q{i}" for i in range(6)]
    assert server.max_in_flight == 2
    assert backend.stats.calls == 1 and backend.stats.requests == 6
    backend.close()


def test_api_key_never_leaks(server, api_key, caplog):
    sleeps = SleepRecorder()
    server.script.extend([("status", 500), ("status", 401)])
    caplog.set_level(logging.DEBUG)
    backend = make_backend(server, sleeps, max_retries=2)
    policy = LLMPolicy(backend, name="api")
    with pytest.raises(BackendError) as info:
        backend.generate([CHAT], temperature=0, max_new_tokens=4)
    texts = [
        caplog.text,
        str(info.value),
        repr(info.value),
        repr(backend),
        json.dumps(backend.describe()),
        json.dumps(policy.describe()),
        json.dumps(backend.stats.as_dict()),
    ]
    assert all(SECRET not in text for text in texts)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert policy.describe()["api_key_env"] == KEY_ENV
    backend.close()


def test_missing_key_for_openai_endpoint_is_clear(monkeypatch):
    monkeypatch.delenv("TOMGYM_NO_SUCH_KEY", raising=False)
    with pytest.raises(BackendError, match="TOMGYM_NO_SUCH_KEY"):
        OpenAICompatBackend("gpt-test", api_key_env="TOMGYM_NO_SUCH_KEY")


def test_local_server_without_key_uses_placeholder(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    backend = make_backend(server, SleepRecorder())
    assert backend.generate([CHAT], temperature=0, max_new_tokens=4) == ["default"]
    backend.close()


def test_spec_builds_openai_policy(server, api_key):
    server.script.append(("ok", "from spec"))
    policy = make_llm_policy(
        f"openai:test-model,base_url={server.base_url},max_retries=0,temperature=0",
        api_key_env=KEY_ENV,
        max_new_tokens=5,
    )
    turn = Turn("g", "a", {"system": "s", "message": "m", "retry": 0, "side_question": 0})
    assert policy.act_batch([turn]) == ["from spec"]
    assert server.requests[0]["body"]["max_tokens"] == 5
    described = policy.describe()
    assert described["backend"] == "openai" and described["model"] == "test-model"
    assert described["name"] == "openai:test-model"
    policy.close()


def test_bad_options_are_rejected(api_key):
    with pytest.raises(ValueError, match="on_failure"):
        OpenAICompatBackend("m", base_url="http://127.0.0.1:9/v1", on_failure="ignore")
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAICompatBackend("m", base_url="http://127.0.0.1:9/v1", max_concurrency=0)
