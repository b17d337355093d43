"""vLLM offline backend: the same interface as `HFBackend`, on vLLM's batched engine.

vLLM is an optional dependency (`pip install 'tomgym[vllm]'`, Linux + CUDA). Prompts are rendered
with the model's chat template into token ids here, then passed to `LLM.generate` as token
prompts, so the prompt tokens are exactly those `generate_ids` reports (token-in/token-out).
`temperature == 0` is greedy; sampling is seeded per request (seed + row index) so answers are
reproducible independent of vLLM's scheduling. A LoRA adapter directory is served with a
`LoRARequest` (the engine is started with `enable_lora=True`). Log-probs are those vLLM returns
for the sampled tokens (raw model log-probs in vLLM >= 0.10's default `logprobs_mode`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.llm.backends import (
    BackendStats,
    Chat,
    GenerationResult,
    TokenizerChatMixin,
)

VLLM_INSTALL_HINT = "vLLM is not installed: pip install 'tomgym[vllm]' (needs Linux and a CUDA GPU)"


def import_vllm() -> Any:
    """Import vllm or raise an ImportError that says how to install it."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(f"{VLLM_INSTALL_HINT} ({exc})") from exc
    return vllm


class VLLMBackend(TokenizerChatMixin):
    """vLLM offline-engine backend. `engine_kwargs` go to `vllm.LLM` unchanged."""

    kind = "vllm"

    def __init__(
        self,
        model: str | Path,
        *,
        adapter: str | Path | None = None,
        model_name: str | None = None,
        **engine_kwargs: Any,
    ) -> None:
        vllm = import_vllm()
        source = str(model)
        if source == "default":
            from tomgym.agents.default_model import default_model_path

            source = str(default_model_path())
        else:
            from tomgym.agents.llm.backends.hf import looks_like_path

            if looks_like_path(source) and not Path(source).expanduser().exists():
                raise FileNotFoundError(f"model checkpoint not found: {source}")
        self._lora_request = None
        if adapter is not None:
            adapter_dir = Path(adapter).expanduser()
            if not (adapter_dir / "adapter_config.json").is_file():
                raise FileNotFoundError(
                    f"LoRA adapter not found (no adapter_config.json): {adapter}"
                )
            from vllm.lora.request import LoRARequest

            engine_kwargs.setdefault("enable_lora", True)
            self._lora_request = LoRARequest(adapter_dir.name, 1, str(adapter_dir))
        self._vllm = vllm
        self.engine = vllm.LLM(model=source, **engine_kwargs)
        self.tokenizer = self.engine.get_tokenizer()
        self.checkpoint = source
        self.adapter = str(Path(adapter).expanduser()) if adapter is not None else None
        self.model_name = model_name or (
            "smollm2-135m-instruct" if str(model) == "default" else str(model)
        )
        self.engine_kwargs = {k: v for k, v in engine_kwargs.items() if _json_safe(v)}
        # The attribute path moved between vLLM releases; without it no trimming happens.
        model_config = getattr(getattr(self.engine, "llm_engine", None), "model_config", None)
        self.context_window: int | None = getattr(model_config, "max_model_len", None)
        self.stats = BackendStats()

    def generate_ids(
        self,
        chats: Sequence[Chat] | None = None,
        *,
        prompt_ids: Sequence[Sequence[int]] | None = None,
        temperature: float,
        top_p: float = 1.0,
        max_new_tokens: int,
        seed: int | None = None,
        return_logprobs: bool = True,
    ) -> list[GenerationResult]:
        prompts = self.prepared_prompts(
            chats, prompt_ids, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens
        )
        if not prompts:
            return []
        start = time.perf_counter()
        params = [
            self._vllm.SamplingParams(
                temperature=temperature,
                top_p=top_p if temperature > 0 else 1.0,
                max_tokens=max_new_tokens,
                seed=None if seed is None or temperature == 0 else seed + row,
                logprobs=0 if return_logprobs else None,
            )
            for row in range(len(prompts))
        ]
        outputs = self.engine.generate(
            [{"prompt_token_ids": ids} for ids in prompts],
            params,
            lora_request=self._lora_request,
            use_tqdm=False,
        )
        results = []
        for ids, output in zip(prompts, outputs, strict=True):
            sample = output.outputs[0]
            completion = list(sample.token_ids)
            logprobs = None
            if return_logprobs and sample.logprobs is not None:
                logprobs = [
                    float(step[token].logprob)
                    for step, token in zip(sample.logprobs, completion, strict=True)
                ]
            results.append(
                GenerationResult(
                    text=sample.text,
                    prompt_ids=ids,
                    completion_ids=completion,
                    logprobs=logprobs,
                    finished=sample.finish_reason == "stop",
                )
            )
        self.stats.calls += 1
        self.stats.requests += len(results)
        self.stats.prompt_tokens += sum(len(r.prompt_ids) for r in results)
        self.stats.completion_tokens += sum(len(r.completion_ids) for r in results)
        self.stats.generate_seconds += time.perf_counter() - start
        return results

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "model": self.model_name,
            "checkpoint": self.checkpoint,
            "adapter": self.adapter,
            "engine": self.engine_kwargs,
        }

    def close(self) -> None:
        self.engine = None


def _json_safe(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))
