"""Secrets never leave the process: `tomgym.redaction` on its own, and the `tomgym` command
against a server that echoes the API key (and its Authorization header) in its 401 body."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_tomgym
from tests.integrations.standin import ChatStandIn, send_json
from tomgym import redaction

# Matches no key pattern and its variable's name says nothing: only registration can catch it.
PLAIN_KEY = "plain-key-Zx81Qw5599-echo"
KEY_ENV = "TOMGYM_TEST_SERVICE_CRED"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abcdefgh12345", "Authorization: Bearer [REDACTED]"),
        ("got bearer xyz.abc-123456 back", "got bearer [REDACTED] back"),
        ('{"api_key": "abcd1234efgh"}', '{"api_key": "[REDACTED]"}'),
        ("openai:m,api_key=abcd1234efgh,x=1", "openai:m,api_key=[REDACTED],x=1"),
        ("key sk-proj-0123456789abcdef used", "key [REDACTED] used"),
        ("openai:m,api_key_env=OPENAI_API_KEY", "openai:m,api_key_env=OPENAI_API_KEY"),
        ("the secret: the vault is behind the oak", "the secret: the vault is behind the oak"),
        ("token position 12", "token position 12"),
        ("the bearer of bad news", "the bearer of bad news"),
    ],
)
def test_redact_patterns(text: str, kept: str) -> None:
    assert redaction.redact(text) == kept


def test_registered_and_environment_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOMGYM_TEST_API_KEY", "env-held-value-998877")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long")  # not a secret's name
    redaction.reset_environment_secrets()
    try:
        redaction.register_secret("registered-value-4242")
        redaction.register_secret("short")  # too short to be a key: ignored
        text = "a env-held-value-998877 b registered-value-4242 c false-but-long d short"
        assert redaction.redact(text) == "a [REDACTED] b [REDACTED] c false-but-long d short"
        data = {"k": ["x registered-value-4242", ("env-held-value-998877",)], "n": 3}
        assert redaction.redact_data(data) == {"k": ["x [REDACTED]", ["[REDACTED]"]], "n": 3}
    finally:
        redaction.reset_environment_secrets()


def test_find_inline_secrets_names_the_setting() -> None:
    config = {"agents": {"a": "openai:m,api_key=xyz12345", "b": "openai:m,api_key_env=K"}}
    assert redaction.find_inline_secrets(config) == ["agents.a"]
    assert redaction.find_inline_secrets({"attackers": ["base", "x,apikey=1"]}) == ["attackers[1]"]


def test_installed_process_redacts_streams_and_logs() -> None:
    code = (
        "import logging, sys\n"
        "from tomgym import redaction\n"
        "redaction.install()\n"
        "redaction.register_secret('in-process-secret-77')\n"
        "print('out in-process-secret-77')\n"
        "print('err Bearer abcdefghijkl', file=sys.stderr)\n"
        "logging.getLogger('x').warning('log %s', 'in-process-secret-77')\n"
        "raise RuntimeError('boom in-process-secret-77')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "in-process-secret-77" not in result.stdout + result.stderr
    assert "abcdefghijkl" not in result.stderr
    assert result.stdout == "out [REDACTED]\n" and "RuntimeError: boom [REDACTED]" in result.stderr
    assert "log [REDACTED]" in result.stderr


class EchoingServer(ChatStandIn):
    """A chat-completions endpoint that answers 401 with the request's key in its body."""

    @property
    def authorizations(self) -> list[str]:
        return [r["headers"].get("authorization", "") for r in self.requests]

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        auth = handler.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        message = f"Incorrect API key {key}. You sent Authorization: {auth}"
        send_json(handler, 401, {"error": {"message": message, "api_key": key}})


@pytest.fixture
def echoing_server() -> Iterator[EchoingServer]:
    with EchoingServer() as server:
        yield server


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


@pytest.mark.parametrize("on_failure", ["fallback", "raise"])
def test_cli_never_shows_or_stores_an_echoed_key(
    echoing_server: EchoingServer, tmp_path: Path, on_failure: str, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "run"
    spec = (
        f"openai:echo-model,base_url={echoing_server.base_url},api_key_env={KEY_ENV},"
        f"max_retries=0,on_failure={on_failure}"
    )
    result = run_tomgym(
        "play", "tomsb", "--agent", f"defender_0={spec}", "--games", "2",
        "--max-attacker-turns", "2", "--out", str(out), extra_env={KEY_ENV: PLAIN_KEY},
    )  # fmt: skip
    assert echoing_server.authorizations[0] == f"Bearer {PLAIN_KEY}"  # the key did travel
    assert "HTTP 401" in result.stderr  # and the server's error was reported
    streams = [result.stdout, result.stderr]
    if on_failure == "fallback":
        assert result.returncode == 0, result.stderr
        report = run_tomgym("report", str(out), "--quiet", extra_env={KEY_ENV: PLAIN_KEY})
        assert report.returncode == 0, report.stderr
        streams += [report.stdout, report.stderr]
        assert (out / "transcripts.html").is_file()
    else:
        assert result.returncode == 1
        assert result.stderr.strip().count("\n") == 0
    files = _files(out)
    assert any(p.name == "config.yaml" for p in files)
    for text in streams + [p.read_text(encoding="utf-8", errors="replace") for p in files]:
        assert PLAIN_KEY not in text
