"""Engine helpers shared by the agent tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def bundled_model() -> tuple[Any, Any]:
    """A fresh copy of the bundled model and its tokenizer, float32 on the CPU (the test is
    skipped when the bundled model cannot be converted here)."""
    import pytest
    from tomgym.agents.default_model import DefaultModelError
    from tomgym.agents.llm.backends.hf import load_hf_model

    try:
        return load_hf_model("default", device="cpu", dtype="float32")
    except DefaultModelError as exc:
        pytest.skip(str(exc))


def same_decoding_either_way(
    model: Any, tokenizer: Any, texts: Sequence[str], max_new_tokens: int, tolerance: float
) -> None:
    """Greedy completions of `texts` through the engine with `packed_linear` off and on have the
    same token ids and per-token log-probs within `tolerance`."""
    prompts = chat_prompts(tokenizer, texts)
    plain, packed = (
        uncached_engine(model, tokenizer, packed_linear=on).generate(
            prompts, max_new_tokens=max_new_tokens
        )
        for on in (False, True)
    )
    for a, b in zip(plain, packed, strict=True):
        assert b.ids == a.ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < tolerance


def uncached_engine(model: Any, tokenizer: Any, **options: Any) -> Any:
    """A `CachedGenerator` over `model` with no conversation store (every prompt encoded whole),
    for tests that drive the engine directly; `options` go to the constructor."""
    from tomgym.agents.llm.kv_cache import CachedGenerator

    return CachedGenerator(
        model,
        eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        context_window=None,
        store=None,
        **options,
    )


def chat_prompts(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of one single-user-message chat per text, ready for the assistant's turn."""
    return [
        tokenizer(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            ),
            add_special_tokens=False,
        )["input_ids"]
        for text in texts
    ]
