"""The repetition guard: a turn caught in a runaway loop stops early and counts as capped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([5] * 8, True),
        ([5] * 7, False),
        ([1, 2, 3] + [7, 8] * 8, True),
        ([7, 8] * 7 + [7], False),
        ([9] + [1, 2, 3, 4] * 8, True),
        ([1, 2, 3, 4, 5] * 8, False),  # a 5-token pattern is past the guard's longest period
        (list(range(40)), False),
        ([1, 2] * 8 + [3], False),  # the loop must reach the last token
    ],
)
def test_repeating_tail(ids: list[int], expected: bool) -> None:
    from tomgym.agents.llm.kv_cache import repeating_tail

    assert repeating_tail(ids) is expected


@pytest.mark.slow
def test_a_looping_model_stops_at_the_guard_and_the_turn_is_capped(tiny_model_dir: Path) -> None:
    import torch
    from tomgym.agents.base import Turn
    from tomgym.agents.llm.kv_cache import REPEAT_MIN_COUNT
    from tomgym.training.rl.generation import hf_generate_fn
    from tomgym.training.rl.tokens import ChatRenderer
    from tomgym.training.rl.trainable import TrainablePolicy
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    loop = int(tokenizer("tom", add_special_tokens=False)["input_ids"][0])
    bias = torch.zeros(model.config.vocab_size)
    bias[loop] = 1e4  # the model now says "tom" forever, as the runaway turns did

    def force(_module: Any, _inputs: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits + bias

    handle = model.lm_head.register_forward_hook(force)
    try:
        renderer = ChatRenderer(tokenizer)
        context = [renderer.first_turn_ids("S", "hi")]
        guarded = hf_generate_fn(model, tokenizer, temperature=0.0, repetition_guard=True)
        (out,) = guarded(context, 64)
        assert out.ids == [loop] * REPEAT_MIN_COUNT and out.finish_reason == "repetition"
        (free,) = hf_generate_fn(model, tokenizer, temperature=0.0)(context, 64)
        assert len(free.ids) == 64 and free.finish_reason == "length"

        policy = TrainablePolicy(renderer, guarded, episode_budget=128, max_turn_tokens=64)
        policy.reset("g")
        policy.act_batch([Turn("g", "defender_0", {"system": "S", "message": "hi"})])
        ep = policy.episode("g")
    finally:
        handle.remove()
    assert ep.completion_ids == [loop] * REPEAT_MIN_COUNT + [renderer.eos_id]
    assert ep.env_mask == [1] * REPEAT_MIN_COUNT + [0]  # the appended EOS is never taught
    assert (ep.capped_turns, ep.repetition_stops, ep.answer_stops) == (1, 1, 0)


def test_the_guard_is_on_by_default_in_the_trainer_config() -> None:
    from tomgym.training.rl.train_config import TrainConfig

    assert TrainConfig().repetition_guard is True
    assert TrainConfig.from_dict({"repetition_guard": False}).repetition_guard is False


def test_vllm_completions_are_cut_where_the_guard_would_stop() -> None:
    from tomgym.agents.llm.kv_cache import REPEAT_MIN_COUNT
    from tomgym.training.rl.generation import Sampled
    from tomgym.training.rl.vllm_generation import VLLMGenerateFn

    looping = [3, 4] + [7] * 20

    class Looping:
        def complete(self, requests: Any, sampling: Any) -> list[Sampled]:
            return [Sampled(list(looping), [-0.5] * len(looping), "length") for _ in requests]

    (cut,) = VLLMGenerateFn(Looping(), eos_token_ids=[0], repetition_guard=True)([[1]], 32)
    assert cut.ids == [3, 4] + [7] * REPEAT_MIN_COUNT and cut.finish_reason == "repetition"
    assert cut.logprobs == [-0.5] * len(cut.ids)
    (free,) = VLLMGenerateFn(Looping(), eos_token_ids=[0])([[1]], 32)
    assert free.ids == looping and free.finish_reason == "length"
