"""Hugging Face transformers backend: batched chat generation on CPU or GPU.

- Prompts are rendered with the tokenizer's chat template (`add_generation_prompt=True`) and
  tokenised without extra special tokens (the template already holds them).
- Batches are LEFT-padded with an attention mask, so every row's last prompt token sits at the
  same position and generation continues each row correctly; greedy answers are the same batched
  or one by one (tested in float32).
- `temperature == 0` is greedy; otherwise sampling (top-k disabled, `top_p` as given) is seeded by
  the `seed` argument inside `torch.random.fork_rng`, so the caller's global RNG is untouched and
  a run is reproducible for a fixed sequence of calls.
- CPU by default when no GPU is present; bf16 on CUDA (`dtype="auto"`); `device_map` passes
  through to `from_pretrained` for multi-GPU sharding. `num_threads` sets torch's CPU threads
  during generation only (restored afterwards): on a shared, oversubscribed CPU one thread was
  ~10x faster than two in our measurements (docs/llm.md).
- A LoRA adapter directory (trained checkpoint) is loaded on top of the base model with PEFT.
- `generate_ids` returns token ids and per-token log-probs for token-in/token-out training;
  `load_hf_model` is the loader the trainer reuses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from tomgym.agents.llm.backends import (
    BackendError,
    BackendStats,
    Chat,
    GenerationResult,
    TokenizerChatMixin,
)
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

logger = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def looks_like_path(model: str) -> bool:
    """True when `model` is meant as a filesystem path rather than a Hub id like `org/name`."""
    return (
        os.path.isabs(model)
        or model.startswith((".", "~"))
        or model.count("/") > 1
        or model.endswith("/")
        or (os.sep != "/" and os.sep in model)
    )


def resolve_model(model: str | Path) -> tuple[str, bool]:
    """Return (`from_pretrained` argument, is_local); a missing local path raises naming it.

    `"default"` is the bundled SmolLM2-135M-Instruct (converted once, see
    `agents.default_model`). Anything else that exists on disk is a local checkpoint; a string
    that looks like a path but does not exist is an error; any other string is a Hub id.
    """
    if str(model) == "default":
        from tomgym.agents.default_model import default_model_path

        return str(default_model_path()), True
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise FileNotFoundError(f"model checkpoint is not a directory: {model}")
        return str(path), True
    if isinstance(model, Path) or looks_like_path(str(model)):
        raise FileNotFoundError(f"model checkpoint not found: {model}")
    return str(model), False


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def resolve_dtype(dtype: str | torch.dtype, device: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        # bf16 halves memory and is what GPUs train in; CPUs are faster and exact in fp32.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected auto or one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def load_hf_model(
    model: str | Path,
    *,
    adapter: str | Path | None = None,
    device: str = "auto",
    dtype: str | torch.dtype = "auto",
    device_map: str | dict[str, Any] | None = None,
    trainable_adapter: bool = False,
) -> tuple[Any, Any]:
    """Load (model, tokenizer) for generation or training.

    The tokenizer pads on the LEFT (decoder-only batching) and has a pad token (EOS when the
    checkpoint defines none). The model is in eval mode on `device` (or sharded by `device_map`),
    with a PEFT LoRA adapter on top when `adapter` is given (`trainable_adapter=True` keeps the
    adapter weights trainable, for resuming training).
    """
    source, is_local = resolve_model(model)
    target = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target)
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        hf_model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except OSError as exc:
        where = "local checkpoint" if is_local else "Hub model (not found locally or offline?)"
        raise BackendError(f"cannot load {where} {source!r}: {exc}") from exc
    if tokenizer.chat_template is None:
        raise BackendError(f"model {source!r} has no chat template; use an instruct model")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if device_map is None:
        hf_model.to(target)
    if adapter is not None:
        adapter_dir = Path(adapter).expanduser()
        if not (adapter_dir / "adapter_config.json").is_file():
            raise FileNotFoundError(f"LoRA adapter not found (no adapter_config.json): {adapter}")
        from peft import PeftModel

        hf_model = PeftModel.from_pretrained(
            hf_model, str(adapter_dir), is_trainable=trainable_adapter
        )
    hf_model.eval()
    return hf_model, tokenizer


@contextlib.contextmanager
def _torch_threads(num_threads: int | None) -> Iterator[None]:
    """Use `num_threads` CPU threads for the duration, then restore the process setting."""
    if num_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class HFBackend(TokenizerChatMixin):
    """transformers generation backend (see module docstring for the contract)."""

    kind = "hf"

    def __init__(
        self,
        model: str | Path,
        *,
        adapter: str | Path | None = None,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        device_map: str | dict[str, Any] | None = None,
        max_batch_size: int = 32,
        num_threads: int | None = None,
        model_name: str | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if num_threads is not None and num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        hf_model, tokenizer = load_hf_model(
            model, adapter=adapter, device=device, dtype=dtype, device_map=device_map
        )
        self._setup(hf_model, tokenizer, max_batch_size=max_batch_size)
        self.num_threads = num_threads
        self.checkpoint = resolve_model(model)[0]
        self.adapter = str(Path(adapter).expanduser()) if adapter is not None else None
        self.model_name = model_name or (
            "smollm2-135m-instruct" if str(model) == "default" else str(model)
        )

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, *, model_name: str = "in-memory", max_batch_size: int = 32
    ) -> HFBackend:
        """Wrap an already loaded model (e.g. the trainer's policy) without copying it."""
        backend = cls.__new__(cls)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        backend._setup(model, tokenizer, max_batch_size=max_batch_size)
        backend.num_threads = None
        backend.checkpoint = str(getattr(model, "name_or_path", model_name))
        backend.adapter = None
        backend.model_name = model_name
        return backend

    def _setup(self, model: Any, tokenizer: Any, *, max_batch_size: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.stats = BackendStats()
        config = model.config
        self.context_window: int | None = getattr(config, "max_position_embeddings", None)
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        if not eos_ids:
            raise BackendError("model defines no end-of-sequence token; cannot stop generation")
        self.eos_token_ids = sorted(eos_ids)

    @property
    def device(self) -> torch.device:
        return self.model.device

    # -- generation ----------------------------------------------------------------------------

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
        """Sample one completion per chat (or per pre-tokenised prompt), token-in/token-out.

        Pass either `chats` (rendered with the chat template) or `prompt_ids` (used verbatim: the
        trainer's spliced multi-turn prefix). Log-probs come from the raw logits of each step
        (temperature 1), computed step by step so memory stays O(batch x vocab).
        """
        prompts = self.prepared_prompts(
            chats, prompt_ids, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens
        )
        if not prompts:
            return []
        start = time.perf_counter()
        results: list[GenerationResult | None] = [None] * len(prompts)
        # Sorting by length keeps padding small inside each sub-batch.
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        cuda_devices = [self.device] if self.device.type == "cuda" else []
        with _torch_threads(self.num_threads), torch.random.fork_rng(devices=cuda_devices):
            if seed is not None:
                torch.manual_seed(seed)
            for lo in range(0, len(order), self.max_batch_size):
                chunk = order[lo : lo + self.max_batch_size]
                outputs = self._generate_chunk(
                    [prompts[i] for i in chunk],
                    temperature=temperature,
                    top_p=top_p,
                    max_new_tokens=max_new_tokens,
                    return_logprobs=return_logprobs,
                )
                for i, result in zip(chunk, outputs, strict=True):
                    results[i] = result
        done = [r for r in results if r is not None]
        self.stats.calls += 1
        self.stats.requests += len(done)
        self.stats.prompt_tokens += sum(len(r.prompt_ids) for r in done)
        self.stats.completion_tokens += sum(len(r.completion_ids) for r in done)
        self.stats.generate_seconds += time.perf_counter() - start
        return done

    @torch.inference_mode()
    def _generate_chunk(
        self,
        prompts: list[list[int]],
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        return_logprobs: bool,
    ) -> list[GenerationResult]:
        pad_id = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
            if temperature > 0
            else {"do_sample": False}
        )
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_token_ids,
            pad_token_id=pad_id,
            return_dict_in_generate=True,
            output_logits=return_logprobs,
            **sampling,
        )
        out = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention_mask.to(self.device),
            generation_config=config,
        )
        new_tokens = out.sequences[:, width:].cpu()
        step_logprobs: torch.Tensor | None = None
        if return_logprobs and out.logits:
            # One step at a time: the full (steps, batch, vocab) float tensor can be large.
            cols = []
            for step, logits in enumerate(out.logits):
                lp = torch.log_softmax(logits.float(), dim=-1)
                cols.append(lp.gather(1, new_tokens[:, step : step + 1].to(lp.device)).cpu())
            step_logprobs = torch.cat(cols, dim=1)
        eos = set(self.eos_token_ids)
        results = []
        for row, ids in enumerate(prompts):
            tokens = new_tokens[row].tolist()
            end = next((k + 1 for k, tok in enumerate(tokens) if tok in eos), None)
            finished = end is not None
            completion = tokens[: end if finished else len(tokens)]
            # Rows that finished early are padded with pad_id (== EOS here): cut after the EOS.
            logprobs = (
                step_logprobs[row, : len(completion)].tolist()
                if step_logprobs is not None
                else None
            )
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            results.append(GenerationResult(text, list(ids), completion, logprobs, finished))
        return results

    # -- bookkeeping ---------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "model": self.model_name,
            "checkpoint": self.checkpoint,
            "adapter": self.adapter,
            "device": str(self.device),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "num_threads": self.num_threads,
        }

    def close(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
