"""Engine helpers shared by the agent tests."""

from __future__ import annotations

from typing import Any


def uncached_engine(model: Any, tokenizer: Any) -> Any:
    """A `CachedGenerator` over `model` with no conversation store (every prompt encoded whole),
    for tests that drive the engine directly."""
    from tomgym.agents.llm.kv_cache import CachedGenerator

    return CachedGenerator(
        model,
        eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        context_window=None,
        store=None,
    )
