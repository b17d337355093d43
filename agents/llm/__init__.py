"""LLM policies: `LLMPolicy` over the HF, vLLM and OpenAI-compatible backends.

Importing this package is cheap: it imports no torch, transformers, vllm or openai. Each backend
module is imported when a backend of that kind is built (`make_llm_policy` or
`agents.llm.backends.HFBackend` etc.).

    from tomgym.agents.llm import make_llm_policy
    policy = make_llm_policy("default", temperature=0.0, max_new_tokens=64)
    policy = make_llm_policy("hf:runs/ckpt,adapter=runs/ckpt/lora")
    policy = make_llm_policy("openai:gpt-4o-mini,max_concurrency=16")
    policy = make_llm_policy("openai:smollm2,base_url=http://127.0.0.1:8080/v1")
"""

from tomgym.agents.llm.backends import Backend, BackendError, BackendStats, GenerationResult
from tomgym.agents.llm.policy import LLMPolicy, make_llm_policy

__all__ = [
    "Backend",
    "BackendError",
    "BackendStats",
    "GenerationResult",
    "LLMPolicy",
    "make_llm_policy",
]
