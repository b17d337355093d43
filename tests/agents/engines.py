"""Engine helpers shared by the agent tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
