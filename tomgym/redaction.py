"""One redaction layer for every text that leaves the process: secrets never appear in output.

What counts as a secret (each replaced by `REDACTED`):
- bearer tokens (`Bearer <token>`, any `Authorization:` value; 12+ token characters, so prose
  such as "the bearer of bad news" is left alone), OpenAI-style keys (`sk-...`),
  and the value of any `api_key` / `apikey` / `x-api-key` / `access_token` / `auth_token` /
  `client_secret` assignment (`api_key=VALUE`, `"api_key": "VALUE"`, `api-key: VALUE`);
- the values of environment variables whose names say they hold a secret (`OPENAI_API_KEY`,
  `HF_TOKEN`, `*_SECRET`, `*_PASSWORD` ...; values under 8 characters are ignored so that a
  `..._TOKEN=1` flag does not blank every "1"), read when first needed;
- every value given to `register_secret` (a backend registers the key it read from the
  variable its spec named with `api_key_env=`, whatever that variable's name).

Entry points: `redact(text)` for one string, `redact_data(value)` for JSON-like data (config,
records, summaries), `find_inline_secrets(value)` for settings that must be refused before they
are stored (a spec with an inline `api_key=`), `install()` for a process: stdout, stderr and every
log record go through `redact` from then on (the `tomgym` command calls it first thing).

This module imports only the standard library, so every layer (envs excepted) may use it.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8  # shorter environment values are flags, not secrets

_SECRET_ENV_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
# Assignments whose value is a key; `api_key_env=NAME` is not one (it names a variable). Plain
# "secret" / "password" keys are left alone: TOM-SB's game text is about secrets.
_ASSIGNMENT = re.compile(
    r"""(?P<key>\b(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)\b"""
    r"""["']?\s*[:=]\s*["']?)(?P<value>(?!\[REDACTED\])[^\s"',;&)}\]]+)""",
    re.IGNORECASE,
)
_BEARER = re.compile(
    r"(?P<key>\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic)\s+)?|\bbearer\s+)"
    r"(?P<value>(?!(?:bearer|basic)\s)[A-Za-z0-9._~+/=-]{12,})",
    re.IGNORECASE,
)
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_INLINE = re.compile(
    r"(?:^|[,\s?&;])(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token)\s*=", re.I
)

_lock = threading.Lock()
_registered: set[str] = set()
_env_secrets: frozenset[str] | None = None


def register_secret(value: str | None) -> None:
    """Redact `value` wherever it appears from now on (ignored when shorter than 8 characters)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _registered.add(value)


def _secrets() -> list[str]:
    global _env_secrets
    if _env_secrets is None:
        _env_secrets = frozenset(
            value
            for name, value in os.environ.items()
            if _SECRET_ENV_NAME.search(name) and len(value) >= MIN_SECRET_CHARS
        )
    with _lock:
        # Longest first, so a secret that contains another is replaced whole.
        return sorted(_env_secrets | _registered, key=len, reverse=True)


def reset_environment_secrets() -> None:
    """Forget the environment values read so far (tests that change the environment)."""
    global _env_secrets
    _env_secrets = None


def redact(text: str) -> str:
    """`text` with every secret (see the module docstring) replaced by `[REDACTED]`."""
    if not text:
        return text
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _BEARER.sub(lambda m: m.group("key") + REDACTED, text)
    text = _SK_KEY.sub(REDACTED, text)
    return _ASSIGNMENT.sub(lambda m: m.group("key") + REDACTED, text)


def redact_data(value: Any) -> Any:
    """A copy of JSON-like `value` with every string (keys included) passed through `redact`."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def find_inline_secrets(value: Any) -> list[str]:
    """Paths (`agents.defender_0`) of strings in `value` that carry an inline key
    (`openai:gpt-4o,api_key=...`): keys belong in the environment, named by `api_key_env=`."""
    return [path or "value" for path, text in _walk(value, "") if _INLINE.search(text)]


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what it writes and forwards everything else to `target`.

    `fileno`, `isatty`, `encoding` ... are the target's, so terminals, progress bars and
    `input()` behave as before.
    """

    def __init__(self, target: TextIO) -> None:
        self._target = target

    def write(self, text: str) -> int:
        self._target.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._target, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def _redacting_factory(factory: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's problem, not ours
            return record
        record.msg, record.args = redact(message), None
        return record

    make.tomgym_redacting = True  # type: ignore[attr-defined]
    return make


def install() -> None:
    """Route this process's stdout, stderr and log records through `redact` (idempotent)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "tomgym_redacting", False):
        logging.setLogRecordFactory(_redacting_factory(factory))
