"""`make_policy`: the player a policy spec names (the grammar itself is `agents.specs`).

Apart from the grammar because building a player imports the players (the LLM policy among
them), and the LLM policy reads its options through the grammar: kept in one module, the two
would import each other.
"""

from __future__ import annotations

from typing import Any

from tomgym.agents.base import Policy
from tomgym.agents.specs import PolicySpec, SpecError, parse_spec


def make_policy(spec: str | PolicySpec, *, seed: int = 0, **overrides: Any) -> Policy:
    """Build the policy a spec names; `overrides` (LLM specs only) win over the spec's options."""
    parsed = parse_spec(spec)
    if parsed.kind == "random":
        from tomgym.agents.decrypto_baselines import RandomDecryptoPolicy

        return RandomDecryptoPolicy(seed=seed)
    if parsed.kind == "embedding":
        from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy
        from tomgym.agents.vectors import DEFAULT_VECTORS

        options = parsed.typed_options()
        return EmbeddingDecryptoPolicy(
            k=options.get("k", 16), seed=seed, vectors=options.get("vectors", DEFAULT_VECTORS)
        )
    if parsed.kind == "scripted":
        from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy

        return make_scripted_tomsb_policy(parsed.target, seed=seed)
    if parsed.kind == "human":
        from tomgym.agents.human import HumanPolicy

        return HumanPolicy()
    if parsed.kind == "frozen":
        raise SpecError("'frozen' names the model being trained; it is only valid in training")
    from tomgym.agents.llm import make_llm_policy

    return make_llm_policy(parsed, seed=seed, **overrides)
