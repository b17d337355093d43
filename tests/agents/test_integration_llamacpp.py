"""End-to-end: LLMPolicy over the OpenAI-compatible backend against a llama.cpp server.

Runs only with `-m integration` (pytest's default addopts deselect it) and then only when
either `TOMGYM_LLAMACPP_URL` points at a running server (e.g. http://127.0.0.1:8080/v1) or
the interpreter `TOMGYM_LLAMACPP_PYTHON` (default: this one) can import `llama_cpp.server`, in
which case the test starts `python -m llama_cpp.server --model <bundled GGUF>` itself on a free
port. `make test-integration` builds that interpreter in `.venv-llamacpp`. See docs/llm.md.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from tomgym.agents.base import Turn
from tomgym.agents.llm import make_llm_policy
from tomgym.training.runner import GameSpec, RunStats, play_games

from tests.agents.transcripts import check_transcript

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(url: str, process: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"llama_cpp.server did not answer at {url} within {deadline_s:.0f}s")


@pytest.fixture(scope="module")
def llamacpp_url() -> Iterator[str]:
    url = os.environ.get("TOMGYM_LLAMACPP_URL")
    if url:
        yield url.rstrip("/")
        return
    server_python = os.environ.get("TOMGYM_LLAMACPP_PYTHON", sys.executable)
    probe = subprocess.run(
        [server_python, "-c", "import llama_cpp.server"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(
            "set TOMGYM_LLAMACPP_URL, or TOMGYM_LLAMACPP_PYTHON to an interpreter with "
            "llama-cpp-python[server] (make test-integration builds one)"
        )
    from tomgym.agents.default_model import gguf_path

    port = _free_port()
    command = [
        server_python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",  # the model's own window: a whole TOM-SB episode outgrows 2048
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(url, process, deadline_s=120)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def test_policy_plays_turns_against_llamacpp(llamacpp_url):
    policy = make_llm_policy(
        f"openai:smollm2,base_url={llamacpp_url},temperature=0,max_new_tokens=16,max_retries=2",
        api_key_env="TOMGYM_LLAMACPP_KEY",
    )
    system = "You are a terse assistant."
    turns = [
        Turn("g1", "a", {"system": system, "message": "Name a colour.", "retry": 0}),
        Turn("g2", "a", {"system": system, "message": "Name an animal.", "retry": 0}),
    ]
    answers = policy.act_batch(turns)
    assert len(answers) == 2 and all(a.strip() for a in answers)
    follow = policy.act_batch([Turn("g1", "a", {"system": system, "message": "Another one."})])
    assert follow[0].strip()
    assert [m["role"] for m in policy.conversation("g1", "a")] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    stats = policy.backend.stats
    assert stats.requests == 3 and stats.failures == 0
    assert stats.completion_tokens > 0
    policy.close()


def test_full_games_through_the_runner_against_llamacpp(llamacpp_url):
    """A Decrypto game and a TOM-SB episode with the served GGUF in every role."""
    policy = make_llm_policy(
        f"openai:smollm2,base_url={llamacpp_url},temperature=0.6,max_new_tokens=48,"
        "max_retries=2,max_concurrency=4",
        api_key_env="TOMGYM_LLAMACPP_KEY",
        seed=0,
    )
    stats = RunStats()
    decrypto_agents = ("encoder_0", "decoder_0", "interceptor_0")
    decrypto = play_games(
        "tomgym/decrypto-v0",
        [GameSpec("lcpp-d0", 1, {"tom": ["perspective_taking"]})],
        {a: policy for a in decrypto_agents},
        env_config={"max_rounds": 2, "max_retries": 1},
        stats=stats,
    )
    tomsb_agents = ("attacker_0", "defender_0")
    tomsb = play_games(
        "tomgym/tomsb-v0",
        [GameSpec("lcpp-t0", 3, {"split": "validation", "attacker": "bluffing"})],
        {a: policy for a in tomsb_agents},
        env_config={"max_attacker_turns": 2, "max_retries": 1},
        stats=stats,
    )
    assert decrypto[0]["outcome"] in {"survived", "miscommunication", "interception", "both"}
    check_transcript(decrypto[0], decrypto_agents)
    assert tomsb[0]["outcome"] in {"fooled", "extracted", "detected", "baited"}
    check_transcript(tomsb[0], tomsb_agents)
    backend = policy.backend.stats
    assert backend.failures == 0 and backend.requests >= stats.turns
    policy.close()
