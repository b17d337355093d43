"""The vLLM-backed `GenerateFn` against stand-in engines with vLLM's call signatures.

No vLLM is installed on CPU machines; the stand-ins reproduce what the code relies on:
`LLM.generate(prompts, sampling_params=[...], use_tqdm=False)` returning `RequestOutput`-like
objects (`outputs[0].token_ids`, `outputs[0].logprobs[i][token_id].logprob`), and the
`/v1/completions` answer of `vllm serve` with `return_token_ids` and `logprobs=0`.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tomgym.training.rl.vllm_generation import (
    ColocatedEngine,
    EngineError,
    ServerEngine,
    StaleWeightsError,
    vllm_generate_fn,
)

VOCAB = 50
EOS = 2


@dataclass
class FakeSamplingParams:
    """vLLM's `SamplingParams` keyword signature (the fields the code passes)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    logprobs: int | None = None
    seed: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)


def toy_sample(prompt: list[int], seed: int, max_tokens: int, version: int) -> tuple[list, list]:
    """A deterministic 'model': tokens drawn from a prompt-and-weights-dependent distribution."""
    rng = np.random.default_rng([seed, sum(prompt) % 9973, version])
    ids, logps = [], []
    for _ in range(max_tokens):
        logits = rng.normal(size=VOCAB)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        token = int(rng.choice(VOCAB, p=probs))
        ids.append(token)
        logps.append(math.log(probs[token]))
        if token == EOS:
            break
    return ids, logps


class StandInLLM:
    """`vllm.LLM` stand-in: records every call and the weight version it sampled with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.weight_version = 0

    def load_weights(self, version: int) -> None:
        self.weight_version = version

    def generate(self, prompts: list, sampling_params: list, use_tqdm: bool = True) -> list:
        self.calls.append(
            {"prompts": prompts, "params": sampling_params, "version": self.weight_version}
        )
        outputs = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            assert set(prompt) == {"prompt_token_ids"}, "prompts must be token ids"
            assert params.logprobs == 0 and params.n == 1
            ids, logps = toy_sample(
                prompt["prompt_token_ids"], params.seed, params.max_tokens, self.weight_version
            )
            steps = [
                {t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(ids, logps, strict=True)
            ]
            completion = SimpleNamespace(token_ids=ids, logprobs=steps)
            outputs.append(SimpleNamespace(outputs=[completion], prompt_token_ids=prompt))
        return outputs


def colocated(llm: StandInLLM, **kwargs: Any):
    return vllm_generate_fn(
        ColocatedEngine(llm, FakeSamplingParams), eos_token_ids=[EOS], seed=7, **kwargs
    )


def test_one_engine_call_per_wave_with_token_prompts_and_own_seeds() -> None:
    llm = StandInLLM()
    generate = colocated(llm)
    contexts = [[5, 6, 7], [5, 6, 7], [9, 10]]
    first = generate(contexts, 12)
    second = generate([[1, 2, 3, 4]], 4)
    assert len(llm.calls) == 2
    call = llm.calls[0]
    assert [p["prompt_token_ids"] for p in call["prompts"]] == contexts
    seeds = [p.seed for p in call["params"]]
    assert len(set(seeds)) == 3, "group members sharing a context must sample independently"
    assert all(0 <= s < 2**63 for s in seeds)
    assert {p.max_tokens for p in call["params"]} == {12}
    assert llm.calls[1]["params"][0].max_tokens == 4
    assert len(first) == 3 and len(second) == 1
    assert first[0].ids != first[1].ids or first[0].logprobs != first[1].logprobs


def test_logprobs_are_the_sampled_tokens_and_cut_after_eos() -> None:
    llm = StandInLLM()
    (out,) = colocated(llm)([[3, 1, 4]], 40)
    params = llm.calls[0]["params"][0]
    ids, logps = toy_sample([3, 1, 4], params.seed, 40, 0)
    end = ids.index(EOS) + 1 if EOS in ids else len(ids)
    assert out.ids == ids[:end]
    assert out.logprobs == pytest.approx(logps[:end])
    assert EOS not in out.ids[:-1]


def test_same_seed_reproduces_the_same_samples() -> None:
    contexts = [[8, 8], [8, 8, 1]]
    a = colocated(StandInLLM())(contexts, 10)
    b = colocated(StandInLLM())(contexts, 10)
    assert a == b


def test_a_stale_engine_is_refused_and_a_synced_one_generates() -> None:
    llm = StandInLLM()
    policy = {"version": 0}
    generate = colocated(llm, weights_current=lambda: llm.weight_version == policy["version"])
    generate([[1, 2]], 3)
    policy["version"] = 1  # an optimisation step updates the policy ...
    with pytest.raises(StaleWeightsError):
        generate([[1, 2]], 3)  # ... and the engine was not synced
    assert len(llm.calls) == 1, "no wave may reach the engine with stale weights"
    llm.load_weights(1)
    generate([[1, 2]], 3)
    assert [c["version"] for c in llm.calls] == [0, 1]


def test_wrong_number_of_outputs_is_an_engine_error() -> None:
    llm = StandInLLM()
    real = llm.generate
    llm.generate = lambda prompts, **kw: real(prompts, **kw)[:-1]  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="2 prompts"):
        colocated(llm)([[1], [2]], 3)


def test_missing_logprobs_are_an_engine_error() -> None:
    llm = StandInLLM()
    real = llm.generate

    def no_logprobs(prompts: list, **kw: Any) -> list:
        out = real(prompts, **kw)
        out[0].outputs[0].logprobs = None
        return out

    llm.generate = no_logprobs  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="log-probs"):
        colocated(llm)([[1]], 3)


class _CompletionsHandler(BaseHTTPRequestHandler):
    """`vllm serve`'s `/v1/completions` for token-id prompts, `logprobs=0`."""

    requests_seen: list[dict] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        data = json.dumps({"object": "list", "data": [{"id": "policy"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests_seen.append(body)
        if self.path != "/v1/completions" or body["model"] != "policy":
            self.send_response(404)
            self.end_headers()
            return
        (prompt,) = body["prompt"]
        ids, logps = toy_sample(prompt, body["seed"], body["max_tokens"], 0)
        answer = {
            "choices": [
                {
                    "index": 0,
                    "token_ids": ids,
                    "prompt_token_ids": prompt,
                    "logprobs": {
                        "tokens": [f"token_id:{t}" for t in ids],
                        "token_logprobs": logps,
                        "top_logprobs": [
                            {f"token_id:{t}": lp} for t, lp in zip(ids, logps, strict=True)
                        ],
                    },
                }
            ]
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def completions_server():
    _CompletionsHandler.requests_seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CompletionsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_server_engine_sends_token_ids_and_one_seed_per_request(completions_server: str) -> None:
    generate = vllm_generate_fn(
        ServerEngine(completions_server, "policy"), eos_token_ids=[EOS], seed=3, temperature=0.7
    )
    contexts = [[4, 5], [4, 5], [6]]
    out = generate(contexts, 8)
    seen = sorted(_CompletionsHandler.requests_seen, key=lambda r: r["seed"])
    assert sorted(r["prompt"][0] for r in seen) == sorted(contexts)
    assert len({r["seed"] for r in seen}) == 3
    assert all(r["logprobs"] == 0 and r["return_token_ids"] and r["n"] == 1 for r in seen)
    assert all(r["temperature"] == 0.7 and r["max_tokens"] == 8 for r in seen)
    assert all(len(s.ids) == len(s.logprobs) > 0 for s in out)
    assert all(s.finish_reason == ("eos" if s.ids[-1] == EOS else "length") for s in out)
    assert generate.cache_stats()["prefill_tokens"] == 0 and not generate.accepts_keys


def test_server_engine_keeps_the_order_of_the_contexts(completions_server: str) -> None:
    engine = ServerEngine(completions_server)  # the served name comes from /v1/models
    assert engine.model == "policy"
    generate = vllm_generate_fn(engine, eos_token_ids=[EOS], seed=11)
    contexts = [[i, i + 1] for i in range(10)]
    out = generate(contexts, 6)
    seeds = {tuple(r["prompt"][0]): r["seed"] for r in _CompletionsHandler.requests_seen}
    for ctx, sampled in zip(contexts, out, strict=True):
        ids, logps = toy_sample(ctx, seeds[tuple(ctx)], 6, 0)
        end = ids.index(EOS) + 1 if EOS in ids else len(ids)
        assert sampled.ids == ids[:end]
        assert sampled.logprobs == pytest.approx(logps[:end])


def test_server_errors_are_one_line_engine_errors(completions_server: str) -> None:
    generate = vllm_generate_fn(ServerEngine(completions_server, "other-model"), seed=0)
    with pytest.raises(EngineError, match="HTTP 404"):
        generate([[1]], 2)
    dead = vllm_generate_fn(ServerEngine("http://127.0.0.1:9", "policy", timeout_s=2), seed=0)
    with pytest.raises(EngineError, match="unreachable"):
        dead([[1]], 2)
