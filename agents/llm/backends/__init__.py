"""Text-generation backends behind `LLMPolicy`: one interface, three engines.

Every backend turns a batch of chat histories (lists of `{"role", "content"}` dicts) into one
answer string per chat in a single call:

    backend.generate(chats, *, temperature, top_p, max_new_tokens, seed=None) -> list[str]

`temperature == 0` means greedy decoding; otherwise sampling is seeded by `seed` so runs are
reproducible (exactly so for the local engines; as far as the server honours `seed` for HTTP).
Backends also expose `count_tokens(chat)` (prompt length, used to keep conversations inside
`context_window`), `describe()` (JSON-safe, never a secret), cumulative token accounting in
`stats`, and `close()`.

Engines (each imported only when constructed, so `import agents.llm` needs no torch):
- `HFBackend` (`agents.llm.backends.hf`): transformers on CPU or GPU, optional PEFT LoRA adapter,
  and `generate_ids` for token-in/token-out training.
- `VLLMBackend` (`agents.llm.backends.vllm`): vLLM offline engine, LoRA via `LoRARequest`.
- `OpenAICompatBackend` (`agents.llm.backends.openai_compat`): any OpenAI-compatible HTTP server
  (OpenAI, vLLM serve, llama.cpp server) with bounded concurrency, timeouts and retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tomgym.agents.llm.backends.hf import HFBackend
    from tomgym.agents.llm.backends.openai_compat import OpenAICompatBackend
    from tomgym.agents.llm.backends.vllm import VLLMBackend

Message = dict[str, str]
Chat = list[Message]


class BackendError(RuntimeError):
    """A backend could not produce an answer (server down, retries exhausted, bad model)."""


@dataclass
class GenerationResult:
    """One sampled completion, token-in/token-out.

    `completion_ids` run through the first end-of-turn token when the model emitted one
    (`finished=True`), otherwise they stop at the `max_new_tokens` cap. `logprobs[i]` is the
    log-probability of `completion_ids[i]` under the model's raw distribution (temperature 1, no
    top-p), which is what a re-scoring forward pass of the same tokens gives; it is None when the
    engine did not return log-probs.
    """

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    finished: bool


@dataclass
class BackendStats:
    """Cumulative accounting, for benchmarks and run reports."""

    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generate_seconds: float = 0.0
    retries: int = 0
    failures: int = 0
    fallbacks: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "generate_seconds": round(self.generate_seconds, 6),
            "retries": self.retries,
            "failures": self.failures,
            "fallbacks": self.fallbacks,
            "errors": dict(self.errors),
        }


@runtime_checkable
class Backend(Protocol):
    """What `LLMPolicy` needs from an engine."""

    kind: str
    model_name: str
    context_window: int | None
    stats: BackendStats

    def generate(
        self,
        chats: Sequence[Chat],
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int | None = None,
    ) -> list[str]: ...

    def count_tokens(self, chat: Chat) -> int: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class TokenizerChatMixin:
    """Chat rendering and text generation shared by the local backends (transformers, vLLM).

    Subclasses set `self.tokenizer` (a HF tokenizer with a chat template) and implement
    `generate_ids`; text generation is `generate_ids` without log-probs.
    """

    tokenizer: Any

    def render(self, chat: Chat) -> str:
        """The chat as the model sees it, ending with the assistant generation prompt."""
        return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)

    def prompt_ids(self, chat: Chat) -> list[int]:
        return list(self.tokenizer(self.render(chat), add_special_tokens=False)["input_ids"])

    def count_tokens(self, chat: Chat) -> int:
        return len(self.prompt_ids(chat))

    def prepared_prompts(
        self,
        chats: Sequence[Chat] | None,
        prompt_ids: Sequence[Sequence[int]] | None,
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
    ) -> list[list[int]]:
        """Validate a `generate_ids` call and return its prompts as token lists.

        Exactly one of `chats` (rendered with the chat template) or `prompt_ids` (used verbatim)
        must be given.
        """
        if (chats is None) == (prompt_ids is None):
            raise ValueError("pass exactly one of chats or prompt_ids")
        validate_sampling(temperature, top_p, max_new_tokens)
        if chats is not None:
            validate_chats(chats)
            return [self.prompt_ids(chat) for chat in chats]
        prompts = [list(p) for p in prompt_ids or ()]
        if any(not p for p in prompts):
            raise ValueError("every prompt_ids entry must be a non-empty token list")
        return prompts

    def generate_ids(
        self, chats: Sequence[Chat] | None = None, **kwargs: Any
    ) -> list[GenerationResult]:
        raise NotImplementedError

    def generate(
        self,
        chats: Sequence[Chat],
        *,
        temperature: float,
        top_p: float = 1.0,
        max_new_tokens: int,
        seed: int | None = None,
    ) -> list[str]:
        results = self.generate_ids(
            chats,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
            return_logprobs=False,
        )
        return [r.text for r in results]


def validate_chats(chats: Sequence[Chat]) -> None:
    """Raise a one-line ValueError unless `chats` is a list of role/content message lists."""
    for i, chat in enumerate(chats):
        if not chat:
            raise ValueError(f"chat {i} is empty")
        for message in chat:
            if not isinstance(message, dict) or set(message) < {"role", "content"}:
                raise ValueError(f"chat {i} has a message without role/content: {message!r}")
            if not isinstance(message["content"], str):
                raise ValueError(f"chat {i} has non-string content: {message['content']!r}")


def validate_sampling(temperature: float, top_p: float, max_new_tokens: int) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")


def __getattr__(name: str) -> Any:
    # Lazy re-exports: importing this package must not import torch, vllm or openai.
    if name == "HFBackend":
        from tomgym.agents.llm.backends.hf import HFBackend

        return HFBackend
    if name == "VLLMBackend":
        from tomgym.agents.llm.backends.vllm import VLLMBackend

        return VLLMBackend
    if name == "OpenAICompatBackend":
        from tomgym.agents.llm.backends.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Backend",
    "BackendError",
    "BackendStats",
    "Chat",
    "GenerationResult",
    "HFBackend",
    "Message",
    "OpenAICompatBackend",
    "VLLMBackend",
    "validate_chats",
    "validate_sampling",
]
