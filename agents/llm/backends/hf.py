"""Hugging Face transformers backend: batched chat generation on CPU or GPU.

- Prompts are rendered with the tokenizer's chat template (`add_generation_prompt=True`) and
  tokenised without extra special tokens (the template already holds them).
- Batches are LEFT-padded with an attention mask and explicit position ids (cached pasts and new
  tokens alike), so every row's last prompt token sits at the same slot and generation continues
  each row correctly; greedy answers are the same batched or one by one, cached or not (tested
  in float32).
- `temperature == 0` is greedy; otherwise sampling (top-k disabled, `top_p` as given) is seeded by
  the `seed` argument inside `torch.random.fork_rng`, so the caller's global RNG is untouched and
  a run is reproducible for a fixed sequence of calls.
- CPU by default when no GPU is present; bf16 on CUDA (`dtype="auto"`); `device_map` passes
  through to `from_pretrained` for multi-GPU sharding. `num_threads` sets torch's CPU threads
  during generation only (restored afterwards): on a shared, oversubscribed CPU one thread was
  ~10x faster than two in our measurements (docs/llm.md).
- A LoRA adapter directory (trained checkpoint) is loaded on top of the base model with PEFT.
- Generation runs through `agents.llm.kv_cache.CachedGenerator`: with `kv_cache=True` (the
  default) each conversation's KV cache is kept between its turns (callers name conversations
  with `keys=`, e.g. `(game_id, agent)`), so a turn prefills only its new tokens; unnamed prompts
  and `kv_cache=False` encode in full, on the same code path. The cache holds at most
  `kv_cache_max_tokens` tokens (least recently used conversations evicted). With
  `kv_cache_share_prefixes=True` (the default) a prompt prefix that several new conversations
  share (the same scenario played against several attackers or seeds, a Dr. GRPO group) is
  prefilled once and each conversation starts from it. Call `forget_conversations` when a game
  ends and `invalidate_cache` whenever the weights change.
- `stop_at_answer=True` (the default) stops a row once its text holds a whole protocol answer
  (`agents.llm.stopping.answer_stop`: a JSON object, or an `ANSWER:` line); such a row ends
  without EOS (`finished=False`), like a capped one.
- `constrain_format=True` keeps every TOM-SB answer inside its protocol template (one JSON
  object, the protocol's keys in order, belief values among their level's names or null, the
  trust a digit; free text only in the reflection and reply strings:
  `agents.llm.constraints.AnswerFormatConstraint`). `constrain_beliefs=True` keeps only the
  belief values inside the universe's names of their level; `constrain_replies=True` keeps the
  universe's names that a reply writes spelled exactly, and of the level it names ("The team
  is ..."; `ReplyNameConstraint`); `constrain_branches=True` keeps a defender's reflection and
  reply off the names its own stated belief rules out, and `constrain_story=True` on the one
  path its first decoy opens (`ReplyBranchConstraint`); `constrain_plan=True` keeps a
  defender's plan naming a value of each level its belief leaves unknown, in order
  (`PlanConstraint`); `constrain_asked=True` keeps a defender's reply answering the level the
  attacker asks for (`ReplyLevelConstraint`). `LLMPolicy`
  passes each turn's role and names (`answer_options=`, read from the observation) to a backend
  with any of them on. All off by default.
- `packed_linear=True` (the default) multiplies by linear weights packed once for oneDNN on CPU
  (`agents.llm.packed_linear`: the same values up to float rounding, faster; the packed copies
  take about the linear weights' memory again); `False` keeps `F.linear`, to compare.
- A prompt that would need positions past `context_window` (prompt + `max_new_tokens`) raises
  `ContextWindowExceeded` before anything is generated.
- `generate_ids` returns token ids and per-token log-probs for token-in/token-out training;
  `load_hf_model` is the loader the trainer reuses.
- The generation switches above (and `max_batch_size`) are the fields of `HFGenerationOptions`:
  both constructors take them as keywords and the `hf:` spec options name them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
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
from tomgym.agents.llm.constraints import AnswerOptions, generator_rules
from tomgym.agents.llm.kv_cache import (
    DEFAULT_MAX_CACHED_TOKENS,
    CachedGenerator,
    ContextWindowExceeded,
    KVCacheStore,
)
from tomgym.agents.llm.stopping import answer_stop
from transformers import AutoModelForCausalLM, AutoTokenizer

logger = logging.getLogger(__name__)

__all__ = [
    "ContextWindowExceeded",
    "HFBackend",
    "HFGenerationOptions",
    "load_hf_model",
    "resolve_model",
]

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


@dataclass(frozen=True)
class HFGenerationOptions:
    """How an `HFBackend` generates (module doc); each field is the `hf:` spec option of its name."""

    max_batch_size: int = 32
    kv_cache: bool = True
    kv_cache_max_tokens: int = DEFAULT_MAX_CACHED_TOKENS
    kv_cache_share_prefixes: bool = True
    stop_at_answer: bool = True
    constrain_format: bool = False
    constrain_beliefs: bool = False
    constrain_replies: bool = False
    constrain_branches: bool = False
    constrain_story: bool = False
    constrain_plan: bool = False
    constrain_asked: bool = False
    packed_linear: bool = True

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {self.max_batch_size}")
        if self.kv_cache_max_tokens < 1:
            raise ValueError(f"kv_cache_max_tokens must be >= 1, got {self.kv_cache_max_tokens}")

    @classmethod
    def from_keywords(cls, options: dict[str, Any]) -> HFGenerationOptions:
        """The options named in `options`; an unknown name is a TypeError that lists the known."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"unknown HFBackend option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**options)


class HFBackend(TokenizerChatMixin):
    """transformers generation backend (see module docstring for the contract).

    `options` holds the generation switches (`HFGenerationOptions`); the answer constraints'
    flags are also attributes, where the policy and `agents.llm.constraints` read them (as on the
    trainer's generate function).
    """

    kind = "hf"

    def __init__(
        self,
        model: str | Path,
        *,
        adapter: str | Path | None = None,
        device: str = "auto",
        dtype: str | torch.dtype = "auto",
        device_map: str | dict[str, Any] | None = None,
        num_threads: int | None = None,
        model_name: str | None = None,
        **options: Any,
    ) -> None:
        """Load `model` (`default`, a hub id or a local checkpoint, plus an optional LoRA
        `adapter`); `options` are `HFGenerationOptions` fields."""
        generation = HFGenerationOptions.from_keywords(options)
        if num_threads is not None and num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        hf_model, tokenizer = load_hf_model(
            model, adapter=adapter, device=device, dtype=dtype, device_map=device_map
        )
        self._setup(hf_model, tokenizer, generation)
        self.num_threads = num_threads
        self.checkpoint = resolve_model(model)[0]
        self.adapter = str(Path(adapter).expanduser()) if adapter is not None else None
        self.model_name = model_name or (
            "smollm2-135m-instruct" if str(model) == "default" else str(model)
        )

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, *, model_name: str = "in-memory", **options: Any
    ) -> HFBackend:
        """Wrap an already loaded model (e.g. the trainer's policy) without copying it;
        `options` are `HFGenerationOptions` fields.

        The caller owns the weights: call `invalidate_cache()` after every change to them.
        """
        generation = HFGenerationOptions.from_keywords(options)
        backend = cls.__new__(cls)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        backend._setup(model, tokenizer, generation)
        backend.num_threads = None
        backend.checkpoint = str(getattr(model, "name_or_path", model_name))
        backend.adapter = None
        backend.model_name = model_name
        return backend

    def _setup(self, model: Any, tokenizer: Any, options: HFGenerationOptions) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.options = options
        self.constrain_format = options.constrain_format
        self.constrain_beliefs = options.constrain_beliefs
        self.constrain_replies = options.constrain_replies
        self.constrain_branches = options.constrain_branches
        self.constrain_story = options.constrain_story
        self.constrain_plan = options.constrain_plan
        self.constrain_asked = options.constrain_asked
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
        self._answer_stop = answer_stop(tokenizer)
        self.engine = CachedGenerator(
            model,
            eos_token_ids=self.eos_token_ids,
            pad_token_id=tokenizer.pad_token_id,
            context_window=self.context_window,
            store=(
                KVCacheStore(
                    options.kv_cache_max_tokens, share_prefixes=options.kv_cache_share_prefixes
                )
                if options.kv_cache
                else None
            ),
            packed_linear=options.packed_linear,
        )

    @property
    def kv_cache(self) -> bool:
        return self.engine.store is not None

    # Conversation keys are understood (LLMPolicy passes `keys=` only to backends that say so).
    accepts_conversation_keys = True

    def forget_conversations(self, game_id: str) -> int:
        """Drop the cached conversations of `game_id` (keys `(game_id, ...)`); returns how many."""
        return self.engine.forget(
            lambda key: isinstance(key, tuple) and bool(key) and key[0] == game_id
        )

    def invalidate_cache(self) -> None:
        """Drop every cached conversation: required after any change to the model's weights."""
        self.engine.invalidate()

    def cache_stats(self) -> dict[str, Any]:
        """Prefill/reuse accounting of the generation engine (JSON-safe)."""
        stats: dict[str, Any] = self.engine.stats.as_dict()
        store = self.engine.store
        stats["cached_tokens"] = store.cached_tokens if store is not None else 0
        stats["cached_conversations"] = len(store) if store is not None else 0
        stats["cached_prefixes"] = len(store.prefixes()) if store is not None else 0
        return stats

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
        keys: Sequence[Hashable | None] | None = None,
        answer_options: Sequence[AnswerOptions | None] | None = None,
    ) -> list[GenerationResult]:
        """Sample one completion per chat (or per pre-tokenised prompt), token-in/token-out.

        Pass either `chats` (rendered with the chat template) or `prompt_ids` (used verbatim: the
        trainer's spliced multi-turn prefix). `keys[i]` names the conversation of prompt `i` for
        KV reuse (None or no `keys`: encoded in full, nothing kept). `answer_options[i]` (a TOM-SB
        turn's role and names, or None) constrains prompt `i`'s answer (module doc). Log-probs
        come from the raw logits of each step (temperature 1), masked where a constraint
        applied. Raises `ContextWindowExceeded` when a prompt plus `max_new_tokens` does not fit
        the context window.
        """
        prompts = self.prepared_prompts(
            chats, prompt_ids, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens
        )
        if not prompts:
            return []
        if keys is not None and len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        if answer_options is not None and len(answer_options) != len(prompts):
            raise ValueError(f"{len(answer_options)} answer_options for {len(prompts)} prompts")
        constraints = generator_rules(self, answer_options)
        start = time.perf_counter()
        stop_when = self._answer_stop if self.options.stop_at_answer else None
        cuda_devices = [self.device] if self.device.type == "cuda" else []
        with _torch_threads(self.num_threads), torch.random.fork_rng(devices=cuda_devices):
            if seed is not None:
                torch.manual_seed(seed)
            completions = self.engine.generate(
                prompts,
                keys,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                stop_when=stop_when,
                max_batch_size=self.options.max_batch_size,
                constraints=constraints,
            )
        results = []
        for ids, completion in zip(prompts, completions, strict=True):
            text = self.tokenizer.decode(completion.ids, skip_special_tokens=True)
            logprobs = list(completion.logprobs) if return_logprobs else None
            finished = completion.finish_reason == "eos"
            results.append(GenerationResult(text, ids, list(completion.ids), logprobs, finished))
        self.stats.calls += 1
        self.stats.requests += len(results)
        self.stats.prompt_tokens += sum(len(r.prompt_ids) for r in results)
        self.stats.completion_tokens += sum(len(r.completion_ids) for r in results)
        self.stats.generate_seconds += time.perf_counter() - start
        return results

    def generate(
        self,
        chats: Sequence[Chat],
        *,
        temperature: float,
        top_p: float = 1.0,
        max_new_tokens: int,
        seed: int | None = None,
        keys: Sequence[Hashable | None] | None = None,
        answer_options: Sequence[AnswerOptions | None] | None = None,
    ) -> list[str]:
        results = self.generate_ids(
            chats,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
            return_logprobs=False,
            keys=keys,
            answer_options=answer_options,
        )
        return [r.text for r in results]

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
            **asdict(self.options),
            # Reported as None when there is no cache to bound.
            "kv_cache_max_tokens": (
                self.engine.store.max_tokens if self.engine.store is not None else None
            ),
        }

    def close(self) -> None:
        """Drop the model and the cached conversations so their memory can be reclaimed."""
        self.engine.invalidate()
        self.engine.model = None
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
