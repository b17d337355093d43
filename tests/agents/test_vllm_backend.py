"""`VLLMBackend` against an in-process stand-in for vLLM's offline engine (no GPU needed).

The stand-in (`FakeVLLM`) has the slice of vLLM's API the backend uses (`vllm.LLM` with
`get_tokenizer`, `llm_engine.model_config.max_model_len` and `generate(prompts, params,
lora_request=, use_tqdm=)`; `vllm.SamplingParams`; `vllm.lora.request.LoRARequest`) and
answers with the bundled model through the transformers backend, shaping its output the way
vLLM's `RequestOutput` / `CompletionOutput` / `Logprob` do. So these tests check our side of the
contract: token prompts, sampling parameters, LoRA requests, and the mapping of text, token ids,
log-probs and finish reasons back into `GenerationResult`s, to the point that a vLLM policy gives
the same greedy answers as the transformers policy. The real engine needs a CUDA GPU:
`bench/gpu_check.sh`.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("transformers")

from tomgym.agents.base import Turn  # noqa: E402
from tomgym.agents.llm import make_llm_policy  # noqa: E402

pytestmark = pytest.mark.slow


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    logprobs: int | None = None


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str


@dataclass
class RequestOutput:
    outputs: list[CompletionOutput]


@dataclass
class FakeEngine:
    """Records every call; generates with the transformers backend it wraps."""

    inner: Any
    init_kwargs: dict[str, Any]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def get_tokenizer(self) -> Any:
        return self.inner.tokenizer

    @property
    def llm_engine(self) -> Any:
        return types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=2048))

    def generate(self, prompts, params, *, lora_request=None, use_tqdm=True):
        assert not use_tqdm
        assert len(prompts) == len(params)
        self.calls.append({"prompts": prompts, "params": params, "lora": lora_request})
        outputs = []
        for prompt, p in zip(prompts, params, strict=True):
            (result,) = self.inner.generate_ids(
                prompt_ids=[prompt["prompt_token_ids"]],
                temperature=p.temperature,
                top_p=p.top_p,
                max_new_tokens=p.max_tokens,
                seed=p.seed,
            )
            logprobs = None
            if p.logprobs is not None:
                logprobs = [
                    {token: Logprob(lp)}
                    for token, lp in zip(result.completion_ids, result.logprobs, strict=True)
                ]
            outputs.append(
                RequestOutput(
                    [
                        CompletionOutput(
                            text=result.text,
                            token_ids=list(result.completion_ids),
                            logprobs=logprobs,
                            finish_reason="stop" if result.finished else "length",
                        )
                    ]
                )
            )
        return outputs


@pytest.fixture(scope="module")
def hf_policy():
    policy = make_llm_policy(
        "default", temperature=0.0, max_new_tokens=8, device="cpu", dtype="float32", num_threads=1
    )
    yield policy
    policy.close()


@pytest.fixture
def fake_vllm(monkeypatch, hf_policy):
    engines: list[FakeEngine] = []

    def make_engine(model: str, **kwargs: Any) -> FakeEngine:
        engine = FakeEngine(hf_policy.backend, {"model": model, **kwargs})
        engines.append(engine)
        return engine

    vllm = types.ModuleType("vllm")
    vllm.LLM = make_engine
    vllm.SamplingParams = SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    return engines


def turns(game: str) -> list[Turn]:
    questions = ["Name a colour.", "Say hi.", "What is two plus two?"]
    return [
        Turn(game, f"agent{i}", {"system": "Answer in a few words.", "message": q, "retry": 0})
        for i, q in enumerate(questions)
    ]


def test_vllm_policy_matches_transformers_greedy_in_one_engine_call(fake_vllm, hf_policy):
    policy = make_llm_policy(
        "vllm:default,gpu_memory_utilization=0.5,max_model_len=2048",
        temperature=0.0,
        max_new_tokens=8,
    )
    (engine,) = fake_vllm
    assert engine.init_kwargs["gpu_memory_utilization"] == 0.5
    assert engine.init_kwargs["model"].endswith("smollm2-135m-instruct")
    answers = policy.act_batch(turns("g"))
    assert len(engine.calls) == 1  # one batch, one engine call
    call = engine.calls[0]
    chats = [policy.conversation("g", f"agent{i}")[:-1] for i in range(3)]
    assert [p["prompt_token_ids"] for p in call["prompts"]] == [
        hf_policy.backend.prompt_ids(chat) for chat in chats
    ]
    assert all(p.temperature == 0 and p.max_tokens == 8 and p.seed is None for p in call["params"])
    assert call["lora"] is None
    expected = hf_policy.act_batch(turns("h"))
    assert answers == expected
    assert policy.backend.stats.calls == 1 and policy.backend.stats.requests == 3
    assert policy.backend.context_window == 2048


def test_vllm_generate_ids_maps_logprobs_finish_and_seeds(fake_vllm, hf_policy):
    policy = make_llm_policy("vllm:default", temperature=1.0, max_new_tokens=6)
    backend = policy.backend
    chat = [{"role": "user", "content": "Tell me a story."}]
    results = backend.generate_ids([chat, chat], temperature=1.0, max_new_tokens=6, seed=5)
    params = fake_vllm[0].calls[-1]["params"]
    assert [p.seed for p in params] == [5, 6]  # seeded per row: independent of scheduling
    assert all(p.logprobs == 0 for p in params)  # the sampled token's log-prob only
    reference = hf_policy.backend.generate_ids(
        prompt_ids=[backend.prompt_ids(chat)], temperature=1.0, max_new_tokens=6, seed=5
    )[0]
    first = results[0]
    assert first.prompt_ids == backend.prompt_ids(chat)
    assert first.completion_ids == reference.completion_ids
    assert first.logprobs == pytest.approx(reference.logprobs)
    assert first.finished == reference.finished
    without = backend.generate_ids([chat], temperature=0, max_new_tokens=3, return_logprobs=False)
    assert without[0].logprobs is None and fake_vllm[0].calls[-1]["params"][0].logprobs is None


def test_vllm_lora_adapter_becomes_a_lora_request(fake_vllm, tmp_path):
    adapter = tmp_path / "ada-step-10"
    with pytest.raises(FileNotFoundError, match="LoRA adapter"):
        make_llm_policy(f"vllm:default,adapter={adapter}")
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    policy = make_llm_policy(f"vllm:default,adapter={adapter},max_lora_rank=32", max_new_tokens=4)
    engine = fake_vllm[-1]
    assert engine.init_kwargs["enable_lora"] is True and engine.init_kwargs["max_lora_rank"] == 32
    policy.act_batch(turns("g")[:1])
    lora = engine.calls[-1]["lora"]
    assert isinstance(lora, LoRARequest) and lora.lora_path == str(adapter)
    assert policy.describe()["adapter"] == str(adapter)


def test_vllm_missing_checkpoint_is_a_clear_error(fake_vllm, tmp_path):
    with pytest.raises(FileNotFoundError, match="model checkpoint not found"):
        make_llm_policy(f"vllm:{tmp_path / 'nope'}")
