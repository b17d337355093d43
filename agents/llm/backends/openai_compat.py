"""OpenAI-compatible HTTP backend (OpenAI, vLLM serve, llama.cpp server, ...).

Contract:
- One chat-completions request per chat, at most `max_concurrency` in flight (a thread pool
  over the official `openai` client), each with a `timeout`-second limit.
- The API key is read ONLY from the environment variable `api_key_env` (default
  OPENAI_API_KEY). It is never logged, never in `describe()`, `repr()` or error messages: the key
  is registered with `tomgym.redaction`, and every server text we repeat (error bodies, which
  may echo the Authorization header, connection errors) passes through `redact` first. A
  server given by `base_url` without a key in the environment gets a placeholder key (local
  servers ignore it); the real OpenAI endpoint without a key is an error.
- Retries are ours alone (the client's own retries are disabled, so every retry is counted in
  `stats.retries`): on HTTP 429, 5xx (and 408/409), connection errors, timeouts and malformed
  response bodies, up to `max_retries` times, sleeping for the server's Retry-After
  (`retry-after-ms` or `retry-after`, seconds or an HTTP date) when given, else exponential
  backoff `backoff_base * 2**attempt` capped at `backoff_max`, with jitter. Other 4xx errors
  (bad request, auth, unknown model) fail at once: retrying cannot fix them.
- When a request finally fails: `on_failure="raise"` raises `BackendError` naming the server,
  model and cause (the runner catches it and keeps the games already finished);
  `on_failure="fallback"` answers "" for that chat and counts it in `stats.fallbacks` (the env then
  re-asks or falls back, counted in its infos).
- `seed` is sent with every request (servers that support it make sampling reproducible);
  `response_format_json=True` sends `response_format={"type": "json_object"}`.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tomgym.agents.llm.backends import (
    BackendError,
    BackendStats,
    Chat,
    validate_chats,
    validate_sampling,
)

from tomgym.redaction import redact, register_secret

logger = logging.getLogger(__name__)

OPENAI_INSTALL_HINT = "the openai package is not installed: pip install 'tomgym[api]'"
_PLACEHOLDER_KEY = "not-needed"  # local servers accept any key; the client insists on one
_RETRYABLE_STATUS = frozenset({408, 409, 429})


class _RetryableError(Exception):
    """A failed attempt worth retrying; `retry_after` is the server's requested wait, if any."""

    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` / `retry-after` headers (seconds or HTTP date)."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class OpenAICompatBackend:
    """Chat completions over HTTP with bounded concurrency, timeouts and counted retries."""

    kind = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        response_format_json: bool = False,
        on_failure: str = "raise",
        context_window: int | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 300.0,
        token_limit_field: str = "max_tokens",
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ImportError(f"{OPENAI_INSTALL_HINT} ({exc})") from exc
        if not model:
            raise ValueError("an OpenAI-compatible backend needs a model name")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if on_failure not in ("raise", "fallback"):
            raise ValueError(f"on_failure must be 'raise' or 'fallback', got {on_failure!r}")
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_limit_field must be max_tokens or max_completion_tokens, "
                f"got {token_limit_field!r}"
            )
        api_key = os.environ.get(api_key_env) or None
        if api_key is None:
            if base_url is None:
                raise BackendError(
                    f"no API key: set the {api_key_env} environment variable "
                    "(or give base_url= for a local server that needs none)"
                )
            api_key = _PLACEHOLDER_KEY
        else:
            register_secret(api_key)
        self._openai = openai
        # max_retries=0: our loop does every retry, so each one is visible and counted.
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
        )
        self.model_name = model
        self.base_url = str(self._client.base_url).rstrip("/")
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.response_format_json = response_format_json
        self.on_failure = on_failure
        self.context_window = context_window
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.token_limit_field = token_limit_field
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=max_concurrency, thread_name_prefix="tomgym-api"
        )
        self.stats = BackendStats()

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(model={self.model_name!r}, base_url={self.base_url!r})"

    # -- interface -----------------------------------------------------------------------------

    def count_tokens(self, chat: Chat) -> int:
        """A conservative estimate (no tokenizer for a remote model): about 3 bytes per token."""
        return sum(len(m["content"].encode()) // 3 + 8 for m in chat) + 8

    def generate(
        self,
        chats: Sequence[Chat],
        *,
        temperature: float,
        top_p: float = 1.0,
        max_new_tokens: int,
        seed: int | None = None,
    ) -> list[str]:
        validate_chats(chats)
        validate_sampling(temperature, top_p, max_new_tokens)
        if not chats:
            return []
        start = time.perf_counter()
        futures = [
            self._pool.submit(
                self._complete,
                chat,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                seed=None if seed is None else seed + row,
            )
            for row, chat in enumerate(chats)
        ]
        answers: list[str] = []
        try:
            for future in futures:
                answers.append(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        finally:
            with self._lock:
                self.stats.calls += 1
                self.stats.generate_seconds += time.perf_counter() - start
        return answers

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "model": self.model_name,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "response_format_json": self.response_format_json,
            "on_failure": self.on_failure,
        }

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    # -- one request ---------------------------------------------------------------------------

    def _complete(
        self, chat: Chat, *, temperature: float, top_p: float, max_new_tokens: int, seed: int | None
    ) -> str:
        request: dict[str, Any] = {
            "model": self.model_name,
            "messages": chat,
            "temperature": temperature,
            "top_p": top_p,
            self.token_limit_field: max_new_tokens,
        }
        if seed is not None:
            request["seed"] = seed
        if self.response_format_json:
            request["response_format"] = {"type": "json_object"}
        last_cause = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.stats.retries += 1
            try:
                return self._attempt(request)
            except _RetryableError as exc:
                last_cause = exc.cause
                self._count_error(exc.cause)
                if attempt == self.max_retries:
                    break
                delay = self._delay(attempt, exc.retry_after)
                logger.warning(
                    "%s: attempt %d/%d failed (%s); retrying in %.2fs",
                    self.base_url,
                    attempt + 1,
                    self.max_retries + 1,
                    exc.cause,
                    delay,
                )
                self._sleep(delay)
            except BackendError as exc:
                last_cause = str(exc)
                self._count_error(last_cause)
                return self._fail(last_cause, attempts=attempt + 1)
        return self._fail(last_cause, attempts=self.max_retries + 1)

    def _attempt(self, request: dict[str, Any]) -> str:
        openai = self._openai
        try:
            response = self._client.chat.completions.create(**request)
        except openai.APITimeoutError:
            raise _RetryableError(f"timed out after {self.timeout:g}s") from None
        except openai.APIConnectionError as exc:
            raise _RetryableError(f"connection error: {_cause_text(exc)}") from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            cause = f"HTTP {status}: {_short(exc.message)}"
            if status in _RETRYABLE_STATUS or status >= 500:
                raise _RetryableError(cause, parse_retry_after(exc.response.headers)) from None
            raise BackendError(cause) from None
        except openai.APIResponseValidationError as exc:
            raise _RetryableError(f"malformed response: {_short(exc.message)}") from None
        except ValueError as exc:  # undecodable JSON body (e.g. truncated)
            raise _RetryableError(f"malformed response body: {_short(str(exc))}") from None
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _RetryableError("malformed response: no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if content is not None and not isinstance(content, str):
            raise _RetryableError("malformed response: message content is not text")
        usage = getattr(response, "usage", None)
        with self._lock:
            self.stats.requests += 1
            if usage is not None:
                self.stats.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                self.stats.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        return content or ""

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        cap = min(self.backoff_max, self.backoff_base * 2**attempt)
        with self._lock:
            # "Equal jitter": at least half the backoff, so retries always slow down.
            return cap / 2 + self._rng.uniform(0, cap / 2)

    def _count_error(self, cause: str) -> None:
        kind = cause.split(":", 1)[0]
        with self._lock:
            self.stats.errors[kind] = self.stats.errors.get(kind, 0) + 1

    def _fail(self, cause: str, *, attempts: int) -> str:
        with self._lock:
            self.stats.failures += 1
        message = (
            f"OpenAI-compatible server {self.base_url} (model {self.model_name!r}) failed after "
            f"{attempts} attempt(s): {cause}"
        )
        if self.on_failure == "fallback":
            with self._lock:
                self.stats.fallbacks += 1
            logger.warning("%s; answering with an empty string", message)
            return ""
        raise BackendError(message)


def _short(text: str, limit: int = 200) -> str:
    """Server text as we repeat it: one line, secrets redacted, at most `limit` characters."""
    text = redact(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cause_text(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return _short(f"{type(cause).__name__}: {cause}" if cause else str(exc))
