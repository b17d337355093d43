"""LLMPolicy: conversation keeping, re-asks, side questions, batching, context bounds, specs,
and the transformers backend on the bundled SmolLM2-135M-Instruct (CPU, float32, short outputs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tomgym.agents.base import Turn
from tomgym.agents.llm import BackendError, BackendStats, LLMPolicy, make_llm_policy

REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeBackend:
    """Records every call; answers `a<call>.<row>`; counts one token per word plus two."""

    kind = "fake"
    model_name = "fake-model"

    def __init__(self, context_window: int | None = None) -> None:
        self.context_window = context_window
        self.calls: list[dict[str, Any]] = []
        self.stats = BackendStats()
        self.fail = False
        self.closed = False

    def generate(self, chats, *, temperature, top_p, max_new_tokens, seed=None) -> list[str]:
        self.calls.append(
            {
                "chats": [[dict(m) for m in chat] for chat in chats],
                "temperature": temperature,
                "seed": seed,
            }
        )
        if self.fail:
            raise BackendError("fake server down")
        return [f"a{len(self.calls)}.{row}" for row in range(len(chats))]

    def count_tokens(self, chat) -> int:
        return sum(len(m["content"].split()) + 2 for m in chat)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.kind, "model": self.model_name}

    def close(self) -> None:
        self.closed = True


def obs(message: str, *, system: str = "SYS", retry: int = 0, side: int = 0) -> dict[str, Any]:
    return {
        "prompt": f"{system}\n{message}",
        "system": system,
        "message": message,
        "retry": retry,
        "side_question": side,
    }


def turn(game: str, agent: str, message: str, **kwargs: Any) -> Turn:
    side_flag = kwargs.pop("side_flag", False)
    return Turn(game, agent, obs(message, **kwargs), side_question=side_flag)


def test_conversation_per_game_and_agent_with_one_call_per_batch():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p")
    answers = policy.act_batch(
        [turn("g1", "a", "m1"), turn("g1", "b", "n1"), turn("g2", "a", "o1")]
    )
    assert answers == ["a1.0", "a1.1", "a1.2"]
    assert len(backend.calls) == 1
    assert backend.calls[0]["chats"][0] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "m1"},
    ]
    policy.act_batch([turn("g1", "a", "m2")])
    assert backend.calls[1]["chats"][0] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "m1"},
        {"role": "assistant", "content": "a1.0"},
        {"role": "user", "content": "m2"},
    ]
    assert policy.conversation("g1", "b")[-1] == {"role": "assistant", "content": "a1.1"}
    assert policy.conversation("g2", "a")[1]["content"] == "o1"


def test_reask_follows_the_bad_answer():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p")
    policy.act_batch([turn("g", "a", "question")])
    policy.act_batch([turn("g", "a", "error: not JSON. question", retry=1)])
    assert [m["content"] for m in backend.calls[1]["chats"][0]] == [
        "SYS",
        "question",
        "a1.0",
        "error: not JSON. question",
    ]
    assert policy.conversation("g", "a")[-1]["content"] == "a2.0"


@pytest.mark.parametrize("via_turn_flag", [True, False])
def test_side_questions_are_answered_in_context_but_not_kept(via_turn_flag):
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p", temperature=0.7, side_question_temperature=0.0)
    policy.act_batch([turn("g", "a", "q1")])
    side = {"side_flag": True} if via_turn_flag else {"side": 1}
    policy.act_batch([turn("g", "a", "what does B believe?", **side)])
    chat = backend.calls[1]["chats"][0]
    assert [m["content"] for m in chat] == ["SYS", "q1", "a1.0", "what does B believe?"]
    assert backend.calls[1]["temperature"] == 0.0
    # A re-ask of the side question sees the side thread, still without keeping it.
    policy.act_batch([turn("g", "a", "bad format, again", retry=1, **side)])
    assert [m["content"] for m in backend.calls[2]["chats"][0]] == [
        "SYS",
        "q1",
        "a1.0",
        "what does B believe?",
        "a2.0",
        "bad format, again",
    ]
    policy.act_batch([turn("g", "a", "q2")])
    assert [m["content"] for m in backend.calls[3]["chats"][0]] == ["SYS", "q1", "a1.0", "q2"]
    assert backend.calls[3]["temperature"] == 0.7
    assert policy.stats["side_questions"] == 2


def test_mixed_batch_makes_at_most_two_calls():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p", temperature=0.5, side_question_temperature=0.1)
    policy.act_batch([turn("g1", "a", "x"), turn("g2", "a", "y")])
    answers = policy.act_batch(
        [turn("g1", "a", "side?", side=1), turn("g2", "a", "next"), turn("g3", "a", "first")]
    )
    assert len(backend.calls) == 3
    assert [c["temperature"] for c in backend.calls[1:]] == [0.5, 0.1]
    assert answers == ["a3.0", "a2.0", "a2.1"]


def test_reset_forgets_only_that_game():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p")
    policy.act_batch([turn("g1", "a", "x"), turn("g2", "a", "y")])
    policy.reset("g1")
    assert policy.conversation("g1", "a") == []
    assert len(policy.conversation("g2", "a")) == 3


def test_backend_failure_leaves_conversations_untouched():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p")
    policy.act_batch([turn("g", "a", "x")])
    before = policy.conversation("g", "a")
    backend.fail = True
    with pytest.raises(BackendError):
        policy.act_batch([turn("g", "a", "y")])
    assert policy.conversation("g", "a") == before
    backend.fail = False
    policy.act_batch([turn("g", "a", "y")])
    assert [m["content"] for m in policy.conversation("g", "a")] == [
        "SYS",
        "x",
        "a1.0",
        "y",
        "a3.0",
    ]


def test_seeds_are_per_call_and_reproducible():
    seeds = []
    for seed in (0, 0, 1):
        backend = FakeBackend()
        policy = LLMPolicy(backend, name="p", seed=seed)
        for i in range(3):
            policy.act_batch([turn("g", "a", f"m{i}")])
        seeds.append([c["seed"] for c in backend.calls])
    assert seeds[0] == seeds[1]
    assert len(set(seeds[0])) == 3
    assert seeds[0] != seeds[2]


def test_context_window_drops_oldest_exchanges_but_keeps_rules_and_question():
    backend = FakeBackend(context_window=60)
    policy = LLMPolicy(backend, name="p", max_new_tokens=10)
    words = " ".join(["w"] * 8)
    for i in range(8):
        policy.act_batch([turn("g", "a", f"m{i} {words}")])
    chat = backend.calls[-1]["chats"][0]
    assert backend.count_tokens(chat) <= 50
    contents = [m["content"] for m in chat]
    assert contents[0] == "SYS"
    assert contents[1].startswith("m0 ")  # the rules exchange is kept
    assert contents[-1].startswith("m7 ")  # the pending question is kept
    assert not any(c.startswith("m1 ") for c in contents)  # the oldest later exchange went
    assert policy.stats["context_trims"] > 0
    # Roles still alternate after trimming.
    roles = [m["role"] for m in chat[1:]]
    assert all(r != s for r, s in zip(roles, roles[1:], strict=False))


def test_stateless_observation_without_message_uses_prompt():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="p")
    t = Turn("g", "a", {"prompt": "full prompt", "system": "S"})
    policy.act_batch([t])
    policy.act_batch([t])
    assert backend.calls[1]["chats"][0] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "full prompt"},
    ]
    assert policy.conversation("g", "a") == []


def test_system_override_and_describe():
    backend = FakeBackend()
    policy = LLMPolicy(backend, name="mine", system_override="OVERRIDE", temperature=0.2, seed=5)
    policy.act_batch([turn("g", "a", "x")])
    assert backend.calls[0]["chats"][0][0] == {"role": "system", "content": "OVERRIDE"}
    described = policy.describe()
    json.dumps(described)
    assert described["name"] == "mine"
    assert described["backend"] == "fake" and described["model"] == "fake-model"
    assert described["sampling"] == {
        "temperature": 0.2,
        "top_p": 1.0,
        "max_new_tokens": 256,
        "seed": 5,
        "side_question_temperature": 0.0,
    }
    policy.close()
    assert backend.closed


def test_two_turns_for_one_agent_in_a_batch_is_an_error():
    policy = LLMPolicy(FakeBackend(), name="p")
    with pytest.raises(ValueError, match="two turns"):
        policy.act_batch([turn("g", "a", "x"), turn("g", "a", "y")])


def test_make_llm_policy_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown option.*colour"):
        make_llm_policy("hf:org/model,colour=red")
    with pytest.raises(ValueError, match="base_url"):
        make_llm_policy("hf:org/model,base_url=http://x")  # an openai-only key
    with pytest.raises(ValueError, match="max_new_tokens='many'"):
        make_llm_policy("openai:m,max_new_tokens=many")
    missing = tmp_path / "no" / "such" / "ckpt"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        make_llm_policy(f"hf:{missing}")
    with pytest.raises(FileNotFoundError, match="adapter.*nowhere"):
        make_llm_policy(f"hf:org/model,adapter={tmp_path / 'nowhere'}")


def test_vllm_missing_gives_install_hint():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed")
    with pytest.raises(ImportError, match=r"pip install 'tomgym\[vllm\]'"):
        make_llm_policy("vllm:org/model")


def test_import_agents_llm_is_light():
    code = (
        "import sys, agents.llm, agents.llm.backends, agents.default_model;"
        "print(sorted(m for m in ('torch','transformers','openai','vllm') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# -- the transformers backend on the real default model ----------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

QUESTIONS = ["Name a colour.", "What is two plus two? Answer with a number.", "Say hi."]


@pytest.fixture(scope="module")
def hf_policy():
    policy = make_llm_policy(
        "default",
        temperature=0.0,
        max_new_tokens=8,
        device="cpu",
        dtype="float32",
        num_threads=1,
    )
    yield policy
    policy.close()


class CountingBackend:
    """Wraps a backend and counts `generate` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.generate_calls = 0
        self.kind, self.model_name = inner.kind, inner.model_name
        self.context_window, self.stats = inner.context_window, inner.stats

    def generate(self, chats: Sequence[Any], **kwargs: Any) -> list[str]:
        self.generate_calls += 1
        return self.inner.generate(chats, **kwargs)

    def count_tokens(self, chat: Any) -> int:
        return self.inner.count_tokens(chat)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def close(self) -> None:
        pass


def test_every_spec_option_is_a_backend_keyword():
    """An option the spec grammar accepts reaches a constructor keyword (a typo in either list
    would otherwise fail only when a model loads); the hf options are exactly its keywords."""
    import dataclasses
    import inspect

    from tomgym.agents.llm.backends.hf import HFBackend, HFGenerationOptions
    from tomgym.agents.llm.backends.openai_compat import OpenAICompatBackend
    from tomgym.agents.specs import BACKEND_OPTION_TYPES

    def keywords(cls: type) -> set[str]:
        parameters = inspect.signature(cls.__init__).parameters.values()
        return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}

    generation = {field.name for field in dataclasses.fields(HFGenerationOptions)}
    hf_keywords = keywords(HFBackend) - {"model_name"} | generation
    assert set(BACKEND_OPTION_TYPES["hf"]) == hf_keywords
    assert set(BACKEND_OPTION_TYPES["openai"]) <= keywords(OpenAICompatBackend)


def test_hf_generation_options_are_checked_before_loading():
    from tomgym.agents.llm.backends.hf import HFBackend

    with pytest.raises(TypeError, match="unknown HFBackend option.*colour.*known:.*kv_cache"):
        HFBackend("no/such-model", colour="red")
    with pytest.raises(ValueError, match="max_batch_size must be >= 1, got 0"):
        HFBackend("no/such-model", max_batch_size=0)
    with pytest.raises(ValueError, match="kv_cache_max_tokens must be >= 1"):
        HFBackend("no/such-model", kv_cache_max_tokens=0)


def hf_turns(game: str) -> list[Turn]:
    return [
        Turn(game, f"agent{i}", obs(q, system="You answer in a few words."))
        for i, q in enumerate(QUESTIONS)
    ]


def test_hf_batch_is_one_call_and_equals_one_by_one(hf_policy):
    counting = CountingBackend(hf_policy.backend)
    batched_policy = LLMPolicy(counting, name="b", temperature=0.0, max_new_tokens=8)
    batched = batched_policy.act_batch(hf_turns("g"))
    assert counting.generate_calls == 1
    single_policy = LLMPolicy(counting, name="s", temperature=0.0, max_new_tokens=8)
    single = [single_policy.act_batch([t])[0] for t in hf_turns("g")]
    assert counting.generate_calls == 1 + len(QUESTIONS)
    assert all(answer.strip() for answer in batched)
    assert batched == single
    # The second turn of a kept conversation is also batched-equal (longer, unequal prompts).
    follow = [Turn("g", f"agent{i}", obs("And why?")) for i in range(len(QUESTIONS))]
    batched_2 = batched_policy.act_batch(follow)
    single_2 = [single_policy.act_batch([t])[0] for t in follow]
    assert batched_2 == single_2


def test_hf_generate_ids_logprobs_match_rescoring_and_seed_reproduces(hf_policy):
    backend = hf_policy.backend
    chat = [{"role": "user", "content": "Tell me a story."}]
    first = backend.generate_ids([chat, chat], temperature=1.0, max_new_tokens=6, seed=11)
    again = backend.generate_ids([chat, chat], temperature=1.0, max_new_tokens=6, seed=11)
    assert [r.completion_ids for r in first] == [r.completion_ids for r in again]
    result = first[0]
    assert result.prompt_ids == backend.prompt_ids(chat)
    assert len(result.logprobs) == len(result.completion_ids) > 0
    if result.finished:
        assert result.completion_ids[-1] in backend.eos_token_ids
    ids = torch.tensor([result.prompt_ids + result.completion_ids])
    with torch.no_grad():
        logits = backend.model(ids).logits[0, len(result.prompt_ids) - 1 : -1]
    rescored = torch.log_softmax(logits.float(), -1).gather(
        1, torch.tensor(result.completion_ids)[:, None]
    )
    assert torch.allclose(rescored[:, 0], torch.tensor(result.logprobs), atol=1e-4)
    # Pre-tokenised prompts (the trainer's spliced prefixes) give the same greedy tokens.
    greedy_chat = backend.generate_ids([chat], temperature=0, max_new_tokens=5)[0]
    greedy_ids = backend.generate_ids(
        prompt_ids=[greedy_chat.prompt_ids], temperature=0, max_new_tokens=5
    )[0]
    assert greedy_ids.completion_ids == greedy_chat.completion_ids
    assert backend.stats.completion_tokens > 0 and backend.stats.prompt_tokens > 0


def test_hf_lora_adapter_loads_on_top(tmp_path, hf_policy):
    peft = pytest.importorskip("peft")
    from tomgym.agents.llm.backends.hf import load_hf_model

    base, _ = load_hf_model("default", device="cpu", dtype="float32")
    config = peft.LoraConfig(
        r=2, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    torch.manual_seed(0)
    peft.get_peft_model(base, config).save_pretrained(tmp_path / "tiny-lora")
    del base

    policy = make_llm_policy(
        f"default,adapter={tmp_path / 'tiny-lora'}",
        temperature=0.0,
        max_new_tokens=4,
        device="cpu",
        num_threads=1,
    )
    described = policy.describe()
    assert described["adapter"] == str(tmp_path / "tiny-lora")
    assert described["name"] == "smollm2-135m-instruct+tiny-lora"
    ids = torch.tensor([hf_policy.backend.prompt_ids([{"role": "user", "content": "Hi"}])])
    with torch.no_grad():
        tuned = policy.backend.model(ids).logits
        plain = hf_policy.backend.model(ids).logits
    assert not torch.allclose(tuned, plain, atol=1e-3)
    assert isinstance(policy.act_batch([Turn("g", "a", obs("Hi"))])[0], str)
    policy.close()
