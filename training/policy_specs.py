"""Policy specs: the strings that name a player on the command line and in configs.

Grammar (one per agent, `--agent AGENT=SPEC`):

    random                       random Decrypto player
    embedding[:k=16,vectors=glove]  (each key optional)
                                 word-embedding Decrypto baseline: K hint candidates,
                                 vectors glove (GloVe 50d) or minilm (all-MiniLM-L6-v2)
    scripted:<name>              TOM-SB attackers base | cross_examiner | deception_aware | bluffing,
                                 defenders refusal | naive | tom_heuristic (and the matrix-only ones)
    default                      the bundled SmolLM2-135M-Instruct (HF transformers, CPU/GPU)
    hf:<model id or path>[,adapter=<LoRA dir>][,temperature=<t>][,max_new_tokens=<n>]
    vllm:<model>[,...]           vLLM offline engine (GPU)
    openai:<model>[,base_url=<url>][,...]   any OpenAI-compatible server (key from OPENAI_API_KEY)
    human                        a person at this terminal

Heavy backends are imported only when their spec is used.
"""

from __future__ import annotations

from typing import Any

from tomgym.agents.base import Policy

LLM_PREFIXES = ("default", "hf:", "vllm:", "openai:")


def _kv(text: str, spec: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise ValueError(f"bad policy spec {spec!r}: expected key=value, got {part!r}")
        key, value = part.split("=", 1)
        params[key.strip()] = value.strip()
    return params


def make_policy(spec: str, *, seed: int = 0, **overrides: Any) -> Policy:
    """Build the policy a spec names; unknown specs raise a one-line ValueError."""
    spec = spec.strip()
    if spec == "random":
        from tomgym.agents.decrypto_baselines import RandomDecryptoPolicy

        return RandomDecryptoPolicy(seed=seed)
    if spec == "embedding" or spec.startswith("embedding:"):
        from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy
        from tomgym.agents.vectors import DEFAULT_VECTORS, VECTOR_NAMES

        params = _kv(spec.partition(":")[2], spec)
        unknown = set(params) - {"k", "vectors"}
        if unknown:
            raise ValueError(
                f"bad policy spec {spec!r}: unknown key(s) {sorted(unknown)} (valid: k, vectors)"
            )
        try:
            k = int(params.get("k", 16))
        except ValueError:
            raise ValueError(f"bad policy spec {spec!r}: k must be an integer") from None
        vectors = params.get("vectors", DEFAULT_VECTORS)
        if vectors not in VECTOR_NAMES:
            raise ValueError(
                f"bad policy spec {spec!r}: vectors must be one of {', '.join(VECTOR_NAMES)}"
            )
        return EmbeddingDecryptoPolicy(k=k, seed=seed, vectors=vectors)
    if spec.startswith("scripted:"):
        from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy

        return make_scripted_tomsb_policy(spec.partition(":")[2], seed=seed)
    if spec == "human":
        from tomgym.agents.human import HumanPolicy

        return HumanPolicy()
    if spec == "default" or spec.startswith(("default,", *LLM_PREFIXES[1:])):
        from tomgym.agents.llm import make_llm_policy

        return make_llm_policy(spec, seed=seed, **overrides)
    raise ValueError(
        f"unknown policy spec {spec!r}; expected random, embedding[:k=K,vectors=V], scripted:<name>, default, "
        "hf:<model>, vllm:<model>, openai:<model> or human"
    )


def parse_agent_specs(
    items: list[str] | None, defaults: dict[str, str], agents: list[str]
) -> dict[str, str]:
    """`["encoder_0=embedding", ...]` over `defaults`; unknown agent ids raise ValueError."""
    specs = dict(defaults)
    for item in items or []:
        agent, sep, spec = item.partition("=")
        if not sep or not spec:
            raise ValueError(f"--agent expects AGENT=SPEC, got {item!r}")
        if agent not in agents:
            raise ValueError(f"unknown agent {agent!r}; this game's agents are {agents}")
        specs[agent] = spec
    return specs


def build_policies(specs: dict[str, str], *, seed: int = 0) -> dict[str, Policy]:
    """One policy object per distinct spec, shared by the agents that use it (one batch per tick)."""
    built: dict[str, Policy] = {}
    for spec in specs.values():
        if spec not in built:
            built[spec] = make_policy(spec, seed=seed)
    return {agent: built[spec] for agent, spec in specs.items()}
