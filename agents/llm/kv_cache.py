"""Multi-turn generation that prefills each token once: per-conversation KV caches, batched.

`CachedGenerator` runs a causal LM (transformers, Llama-style `cache=`/`position_ids` forward)
over a batch of token-id prompts, each optionally tagged with a conversation key. Contract:

- Reuse is correct by construction: a conversation's entry holds the token ids whose keys and
  values it stores. On the next turn the longest common prefix of those ids and the new prompt is
  kept (the KV of a position depends only on the tokens up to it) and only the rest is fed. When
  the cached ids are not a prefix of the new prompt (a chat template that re-renders earlier turns,
  e.g. Qwen3 stripping old `<think>` blocks) the entry is cut back to the common prefix and the
  event is counted (`prefix_mismatches`); with no common prefix it is a full re-encode. The model
  therefore always sees exactly the prompt it is given.
- Batching with different cached lengths: every row is left-padded twice, once in front of its
  past and once in front of its new tokens (`[pad | past | pad | new]`), with the attention mask
  marking the holes and explicit `position_ids` (the row's true positions), so one forward pass
  and one decode loop serve rows of any cached length. Prompts are grouped by new-token count
  so a long first turn does not pad the short follow-ups of other games; the prefill runs in
  token chunks (`prefill_chunk_tokens` rows x tokens per forward) so attention memory stays
  bounded; rows that finish idle in the decode batch (a pad token fed, outputs ignored) until
  half of it has finished, then leave it in one compaction.
- Shared prefixes: a prompt with no cached past of its own (a conversation's first turn) starts
  from the longest prefix cached for several conversations (`SharedPrefix` entries of the
  store). In each call the prefixes that two or more such prompts share, at least
  `KVCacheStore.min_shared_tokens` beyond what they already start from, are prefilled once
  each, nested ones on top of their parent (`plan_shared_prefixes`): a Dr. GRPO group's common
  first prompt, one scenario played against every attacker variant. A prefix is read, never
  written: a conversation copies it on its first save. It saves prefill compute, not memory
  (each conversation still holds its own copy), and stays while a cached conversation starts
  with it (or until evicted). `KVCacheStore(share_prefixes=False)` turns it off.
- Memory is bounded: `KVCacheStore` caps the cached tokens over all conversations and shared
  prefixes and evicts the least recently used first (a conversation's next turn is then a full
  re-encode, counted).
- Decoding is greedy at `temperature == 0`, else sampling (`top_k`, `top_p`) from torch's global
  RNG (seed it outside, e.g. inside `torch.random.fork_rng`). Log-probs are those of
  `log_softmax(logits / logprob_temperature)` (1 = the raw distribution).
- A row stops at an end-of-sequence token (`finish_reason="eos"`, the token is kept), when
  `stop_when(decoded_text)` says the answer is complete (`"answer"`), when `repetition_guard`
  is on and its ids end in a runaway loop (`repeating_tail`: the same 1-4-token pattern 8 times
  in a row, `"repetition"`), or at `max_new_tokens` (`"length"`).
- Constraints: `constraints[i]` (an `agents.llm.constraints.TokenConstraint`, or None) is asked
  before each of row i's tokens which ids may come next (or, as an `Excluded`, which may not);
  every other (every excluded) logit is masked out before the pick, and the log-probs are those
  of the masked distribution. A token that was the only one allowed is marked in
  `Completion.forced` (the model made no choice there; the trainer leaves it out of the loss).
- Context window: a prompt with `len(prompt) + max_new_tokens > context_window` is never fed;
  `generate` raises `ContextWindowExceeded` naming every such row before any work is done, so the
  caller ends those conversations as truncated (reason `"context_window"`) instead of feeding
  positions past the window.
- Attention: a grouped-query model on `sdpa` attends with `attention.grouped_sdpa_forward` during
  `generate` (the same attention without copying the KV cache once per query head group).
- Linear layers: during `generate` the model's linear layers multiply by weights packed once for
  oneDNN on CPU (`packed_linear.packed_linear`: the same values up to float rounding, faster at
  every row count measured); `packed_linear=False` keeps `F.linear`, to compare the two.
- Caches are only valid for the weights that computed them: call `invalidate()` whenever the
  weights change (an optimisation step, loading an adapter); it also drops the packed weights.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from tomgym.agents.llm import packed_linear as packing
from tomgym.agents.llm.attention import grouped_attention
from tomgym.agents.llm.constraints import Excluded
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

if TYPE_CHECKING:
    from tomgym.agents.llm.constraints import TokenConstraint

ConversationKey = Hashable

DEFAULT_MAX_CACHED_TOKENS = 131_072
"""Default cap on cached tokens over all conversations (SmolLM2-135M fp32: ~45 KB per token)."""

DEFAULT_MIN_SHARED_TOKENS = 64
"""Shortest prompt prefix worth caching once for several new conversations (`KVCacheStore`)."""

DEFAULT_PREFILL_CHUNK_TOKENS = 4096
"""Rows x new tokens per prefill forward pass: bounds the attention scores' memory."""

REPEAT_MAX_PERIOD = 4
"""Longest token pattern the repetition guard looks for."""

REPEAT_MIN_COUNT = 8
"""Back-to-back copies of a pattern that count as a runaway loop (a small model's "tom_tom_...")."""


def repeating_tail(
    ids: Sequence[int], *, max_period: int = REPEAT_MAX_PERIOD, min_count: int = REPEAT_MIN_COUNT
) -> bool:
    """True when `ids` ends with `min_count` back-to-back copies of one 1..`max_period`-token
    pattern (checked for every period; costs at most `max_period * min_count` comparisons)."""
    for period in range(1, max_period + 1):
        span = period * min_count
        if len(ids) < span:
            break
        tail = ids[-span:]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            return True
    return False


# Rows that finish idle in the decode batch until this share of it is still decoding; then the
# batch cache is compacted (one copy of the remaining rows' caches instead of one per finish).
_COMPACT_AT = 0.5

# Grouping slack: a prompt joins a prefill group while the group's padded token count stays
# within this factor of its real token count.
_PADDING_SLACK = 1.25


class ContextWindowExceeded(RuntimeError):
    """Prompts that would need positions past the model's context window; nothing was generated.

    `rows` lists `(index, key, prompt_tokens)` of every offending prompt in the call; the caller
    should end those conversations as truncated with reason `"context_window"`.
    """

    reason = "context_window"

    def __init__(
        self,
        rows: Sequence[tuple[int, ConversationKey | None, int]],
        *,
        max_new_tokens: int,
        context_window: int,
    ) -> None:
        self.rows = list(rows)
        self.max_new_tokens = max_new_tokens
        self.context_window = context_window
        worst = max(tokens for _, _, tokens in self.rows)
        super().__init__(
            f"{len(self.rows)} prompt(s) do not fit the {context_window}-token context window "
            f"with {max_new_tokens} new tokens (longest prompt: {worst} tokens)"
        )


@dataclass
class CacheStats:
    """Cumulative accounting of what was fed to the model and what was reused.

    `shared_prefix_hits` counts prompts that started from a shared prefix, `shared_prefix_tokens`
    the tokens those prefixes spared them (also in `reused_tokens`), `prefixes_cached` the
    shared prefixes prefilled (their tokens are in `prefill_tokens`). `prefill_seconds` is the
    wall time of the prefill passes (a call's new prompt tokens),
    `decode_seconds` that of the token-by-token loop after them (sampling, constraints and saving
    the conversations' caches included). Both are host wall clock: on a GPU the prefill is
    synchronised before its clock stops, so the split holds there too.
    """

    requests: int = 0
    prefill_tokens: int = 0
    reused_tokens: int = 0
    decode_tokens: int = 0
    cache_hits: int = 0
    prefix_mismatches: int = 0
    full_encodes: int = 0
    evictions: int = 0
    invalidations: int = 0
    shared_prefix_hits: int = 0
    shared_prefix_tokens: int = 0
    prefixes_cached: int = 0
    peak_cached_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@dataclass
class _Entry:
    """A conversation's cached state.

    `layers[i] = (keys, values)`, each a buffer (heads, capacity, dim) whose first `len(self)`
    positions hold the KV of `token_ids`; the spare room lets the next turn append in place
    (`extend`) instead of copying the whole conversation out of the batch again.
    """

    token_ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    shared: bool = False  # the buffers belong to a shared prefix: `extend` copies them first

    def __len__(self) -> int:
        return len(self.token_ids)

    def cropped(self, length: int) -> _Entry:
        """The first `length` tokens. Shares the buffers (cropping copies nothing), so extending
        the crop overwrites this entry's later positions: use only the crop afterwards."""
        return _Entry(self.token_ids[:length], list(self.layers), self.shared)

    def shared_view(self) -> _Entry:
        """A conversation's start from this (shared prefix) entry: reads its buffers in place,
        and its first `extend` copies them, so the prefix itself is never written."""
        return _Entry(list(self.token_ids), list(self.layers), shared=True)

    def kv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of one layer's valid keys and values, (heads, len, dim)."""
        keys, values = self.layers[layer]
        return keys[:, : len(self)], values[:, : len(self)]

    def extend(
        self, token_ids: Sequence[int], parts: Sequence[Sequence[tuple[torch.Tensor, torch.Tensor]]]
    ) -> None:
        """Append tokens whose KV is `parts[layer]`: (keys, values) chunks, (heads, n, dim),
        summing to `len(token_ids)` positions; buffers grow by doubling when full."""
        start, end = len(self), len(self) + len(token_ids)
        for layer, chunks in enumerate(parts):
            keys, values = self.layers[layer]
            if end > keys.shape[1] or self.shared:
                keys = _grown(keys, start, end)
                values = _grown(values, start, end)
                self.layers[layer] = (keys, values)
            at = start
            for k, v in chunks:
                keys[:, at : at + k.shape[1]] = k
                values[:, at : at + v.shape[1]] = v
                at += k.shape[1]
            if at != end:
                raise RuntimeError(f"KV for {at - start} positions, {end - start} token ids")
        self.token_ids = self.token_ids[:start] + list(token_ids)
        self.shared = False


def _grown(buffer: torch.Tensor, keep: int, need: int) -> torch.Tensor:
    """A larger (heads, capacity, dim) buffer holding the first `keep` positions of `buffer`."""
    heads, capacity, dim = buffer.shape
    grown = buffer.new_empty((heads, max(need, 2 * capacity, 64), dim))
    grown[:, :keep] = buffer[:, :keep]
    return grown


@dataclass(frozen=True)
class SharedPrefix:
    """Store key of a prompt prefix cached once for every conversation that starts with it."""

    token_ids: tuple[int, ...]


class KVCacheStore:
    """Per-conversation caches and shared prompt prefixes under one token cap, least recently
    used evicted first.

    With `share_prefixes` the generator caches, once, each prefix of at least
    `min_shared_tokens` tokens that several new conversations start with (`SharedPrefix` keys);
    a prefix stays while a cached conversation still starts with it, or until evicted.
    `len()`, `keys()` and `forget()` see conversations only.
    """

    def __init__(
        self,
        max_tokens: int = DEFAULT_MAX_CACHED_TOKENS,
        *,
        share_prefixes: bool = True,
        min_shared_tokens: int = DEFAULT_MIN_SHARED_TOKENS,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if min_shared_tokens < 1:
            raise ValueError(f"min_shared_tokens must be >= 1, got {min_shared_tokens}")
        self.max_tokens = int(max_tokens)
        self.share_prefixes = bool(share_prefixes)
        self.min_shared_tokens = int(min_shared_tokens)
        self._entries: OrderedDict[ConversationKey, _Entry] = OrderedDict()
        self.cached_tokens = 0
        self.stats = CacheStats()

    def __len__(self) -> int:
        return sum(1 for key in self._entries if not isinstance(key, SharedPrefix))

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[ConversationKey]:
        return [key for key in self._entries if not isinstance(key, SharedPrefix)]

    def prefixes(self) -> dict[tuple[int, ...], _Entry]:
        """The shared prefixes held, by token ids."""
        return {k.token_ids: e for k, e in self._entries.items() if isinstance(k, SharedPrefix)}

    def touch(self, key: ConversationKey) -> None:
        """Mark an entry as just used (last to be evicted)."""
        if key in self._entries:
            self._entries.move_to_end(key)

    def cached_ids(self, key: ConversationKey) -> list[int] | None:
        entry = self._entries.get(key)
        return None if entry is None else list(entry.token_ids)

    def take(self, key: ConversationKey) -> _Entry | None:
        """Remove and return the entry of `key` (the generator puts the grown one back)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.cached_tokens -= len(entry)
        return entry

    def put(self, key: ConversationKey, entry: _Entry) -> None:
        self.take(key)
        if len(entry) > self.max_tokens:
            self.stats.evictions += 1
            return
        self._entries[key] = entry
        self.cached_tokens += len(entry)
        while self.cached_tokens > self.max_tokens:
            _, evicted = self._entries.popitem(last=False)
            self.cached_tokens -= len(evicted)
            self.stats.evictions += 1
        self.stats.peak_cached_tokens = max(self.stats.peak_cached_tokens, self.cached_tokens)

    def forget(self, predicate: Callable[[ConversationKey], bool]) -> int:
        """Drop every conversation whose key satisfies `predicate`, and every shared prefix no
        remaining conversation starts with; returns how many conversations."""
        doomed = [key for key in self.keys() if predicate(key)]
        for key in doomed:
            self.take(key)
        if doomed:
            alive = [
                e.token_ids for k, e in self._entries.items() if not isinstance(k, SharedPrefix)
            ]
            for ids in list(self.prefixes()):
                if not any(len(t) > len(ids) and starts_with(t, ids) for t in alive):
                    self.take(SharedPrefix(ids))
        return len(doomed)

    def clear(self) -> None:
        self._entries.clear()
        self.cached_tokens = 0


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids `a` and `b` have in common."""
    shared = min(len(a), len(b))
    n = 0
    while n < shared and a[n] == b[n]:
        n += 1
    return n


def starts_with(ids: Sequence[int], prefix: tuple[int, ...]) -> bool:
    """Whether `ids` begins with every token of `prefix`."""
    return len(ids) >= len(prefix) and tuple(ids[: len(prefix)]) == prefix


def plan_shared_prefixes(
    prompts: Sequence[Sequence[int]], known: Sequence[Sequence[int]], min_tokens: int
) -> list[tuple[int, ...]]:
    """The new prefixes worth caching once for `prompts`, shortest first.

    A prefix is planned where at least two prompts share it (each keeping at least one token
    after it to feed) and it is at least `min_tokens` longer than what its prompts already
    start from: a `known` prefix, or a shorter planned one (a common system prompt, then each
    scenario's own text, as nested prefixes). These are the internal nodes of the prompts'
    compressed trie: the common prefixes of neighbours in sorted order.
    """

    usable = [list(p[: len(p) - 1]) for p in prompts]
    known = [tuple(k) for k in known]
    starts = [max((len(k) for k in known if starts_with(u, k)), default=0) for u in usable]
    order = sorted(range(len(usable)), key=lambda i: usable[i])
    shared = [
        common_prefix_length(usable[a], usable[b]) for a, b in zip(order, order[1:], strict=False)
    ]
    planned: list[tuple[int, ...]] = []

    def visit(lo: int, hi: int, base: int) -> None:
        # order[lo:hi] share at least `base` tokens through a planned prefix (0: none).
        if hi - lo < 2:
            return
        depth = min(shared[lo : hi - 1])
        floor = max(base, min(starts[i] for i in order[lo:hi]))
        if depth - floor >= min_tokens:
            planned.append(tuple(usable[order[lo]][:depth]))
            base = depth
        first = lo
        for i in range(lo, hi - 1):
            if shared[i] == depth:
                visit(first, i + 1, base)
                first = i + 1
        visit(first, hi, base)

    visit(0, len(order), 0)
    return sorted(planned, key=len)


@dataclass
class Completion:
    """One generated continuation: ids (EOS included when emitted) and their log-probs."""

    ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "length"  # "eos" | "answer" | "repetition" | "length"
    forced: list[bool] = field(default_factory=list)  # per id: the only token a constraint allowed


class _GrowingLayer(DynamicLayer):
    """A `DynamicLayer` over a buffer with spare room: appending a token writes in place.

    The stock layer concatenates on every update, copying the whole cache once per decoded
    token; this one is handed a buffer (batch, heads, capacity, dim) whose first `length`
    positions hold the cache, grows it by doubling when full, and exposes `keys`/`values` as
    views.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        super().__init__()
        self._k, self._v = keys, values
        self._length = length
        self.device = keys.device
        self.is_initialized = True
        self._expose()

    def _expose(self) -> None:
        self.keys = self._k[:, :, : self._length]
        self.values = self._v[:, :, : self._length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        new = key_states.shape[-2]
        if self._length + new > self._k.shape[-2]:
            room = max(self._k.shape[-2], new)
            self._k = torch.cat(
                [self._k, self._k.new_zeros(*self._k.shape[:2], room, self._k.shape[3])], dim=2
            )
            self._v = torch.cat(
                [self._v, self._v.new_zeros(*self._v.shape[:2], room, self._v.shape[3])], dim=2
            )
        self._k[:, :, self._length : self._length + new] = key_states
        self._v[:, :, self._length : self._length + new] = value_states
        self._length += new
        self._expose()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._k = self._k[indices]
        self._v = self._v[indices]
        self._expose()


class _BufferPool:
    """Flat tensors kept from earlier batches, so each turn's batch cache reuses memory.

    A fresh multi-MB allocation is page-faulted in on first write (on CPU that cost as much as
    copying the conversations into it); reusing last turn's buffers avoids it. Holds at most the
    buffers of one batch; `clear()` releases them.
    """

    def __init__(self) -> None:
        self._free: list[torch.Tensor] = []

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
        need = math.prod(shape)
        fits = [
            i
            for i, t in enumerate(self._free)
            if t.numel() >= need and t.dtype == dtype and t.device == torch.device(device)
        ]
        if not fits:
            # Headroom, so next turn's (longer) conversations still fit this buffer.
            flat = torch.empty(need + need // 4, dtype=dtype, device=device)
            return flat[:need].view(shape)
        best = min(fits, key=lambda i: self._free[i].numel())
        return self._free.pop(best)[:need].view(shape)

    def give(self, tensors: Sequence[torch.Tensor]) -> None:
        # Keep each tensor's whole storage (a view taken from the pool spans only its start).
        self._free = [
            torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())
            for t in tensors
        ]

    def clear(self) -> None:
        self._free = []


def _batch_cache(
    pasts: Sequence[_Entry | None], model: Any, spare: int, pool: _BufferPool
) -> tuple[DynamicCache, torch.Tensor]:
    """A batch cache holding each row's past right-aligned, and its (rows, width) mask.

    Each layer's buffer is taken from `pool` with `spare` free positions after the pasts and
    filled with one copy per row; only the holes in front of a shorter past are zeroed (masked
    positions are never attended to, but must stay finite: 0 x NaN is NaN). Positions past the
    width are written by the forward passes before anything reads them.
    """
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    lengths = [len(p) if p is not None else 0 for p in pasts]
    width = max(lengths, default=0)
    mask = torch.zeros((len(pasts), width), dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, width - length :] = 1
    shape = (len(pasts), heads, width + spare, dim)
    layers = []
    for layer in range(config.num_hidden_layers):
        keys = pool.take(shape, model.dtype, model.device)
        values = pool.take(shape, model.dtype, model.device)
        for row, (past, length) in enumerate(zip(pasts, lengths, strict=True)):
            keys[row, :, : width - length].zero_()
            values[row, :, : width - length].zero_()
            if past is not None and length:
                k, v = past.kv(layer)
                keys[row, :, width - length : width] = k
                values[row, :, width - length : width] = v
        layers.append(_GrowingLayer(keys, values, width))
    cache = DynamicCache()
    cache.layers = layers
    return cache, mask


def cache_kwarg(model: Any) -> str:
    """The forward() keyword that takes a KV cache: `cache` in the transformers releases that
    renamed it (5.24 keeps `past_key_values` as a deprecated alias), `past_key_values` in older
    ones (5.17), which silently drop an unknown `cache=` into **kwargs and start a fresh cache.
    Read from the underlying model's signature (a PEFT wrapper's forward takes **kwargs)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _runs(row_mask: torch.Tensor, start: int = 0) -> list[tuple[int, int]]:
    """The maximal runs of ones in a 0/1 vector from column `start` on, as (start, end)."""
    padded = torch.nn.functional.pad(row_mask[start:].to(torch.int8), (1, 1))
    edges = (padded[1:] - padded[:-1]).nonzero().squeeze(-1).tolist()
    return [(start + a, start + b) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _save_row(
    cache: DynamicCache,
    mask: torch.Tensor,
    row: int,
    past: _Entry | None,
    past_width: int,
    token_ids: list[int],
) -> _Entry:
    """The conversation state of one batch row after its turn: `past` (the entry the row
    started from, whose tokens fill the columns before `past_width`) extended in place with the
    row's later real slots, which form a few contiguous runs (its new tokens and what it
    decoded, behind padding); only those are copied out of the batch."""
    runs = _runs(mask[row], past_width)
    parts = [
        [(layer.keys[row, :, a:b], layer.values[row, :, a:b]) for a, b in runs]
        for layer in cache.layers
    ]
    if past is None:
        _, heads, _, dim = cache.layers[0].keys.shape
        shape = (heads, len(token_ids) + len(token_ids) // 2, dim)
        like = cache.layers[0].keys
        past = _Entry([], [(like.new_empty(shape), like.new_empty(shape)) for _ in cache.layers])
    past.extend(token_ids[len(past) :], parts)
    return past


def _constrained(
    logits: torch.Tensor,
    rules: Sequence[TokenConstraint | None],
    completions: Sequence[list[int]],
) -> tuple[torch.Tensor, set[int]]:
    """`logits` with every token a row's constraint does not allow set to -inf, and the rows
    whose constraint allowed a single token."""
    masked = None
    forced: set[int] = set()
    for row, (rule, ids) in enumerate(zip(rules, completions, strict=True)):
        allowed = rule.allowed(ids) if rule is not None else None
        if not allowed:
            continue
        if masked is None:
            masked = logits.clone()
        if isinstance(allowed, Excluded):
            masked[row, torch.tensor(allowed, dtype=torch.long, device=logits.device)] = float(
                "-inf"
            )
            continue
        if len(allowed) == 1:
            forced.add(row)
        keep = torch.tensor(list(allowed), dtype=torch.long, device=logits.device)
        row_logits = torch.full_like(masked[row], float("-inf"))
        row_logits[keep] = masked[row, keep]
        masked[row] = row_logits
    return (logits if masked is None else masked), forced


@dataclass
class _Prefilled:
    """A batch after its prompts were fed: the cache, its mask, the last position's logits, and
    per row the cached length it started from and the ids fed."""

    cache: DynamicCache
    mask: torch.Tensor
    logits: torch.Tensor
    past_lens: list[int]
    new_ids: list[list[int]]

    @property
    def past_width(self) -> int:
        """The longest past: the batch columns before every row's new tokens."""
        return max(self.past_lens)


class CachedGenerator:
    """Batched multi-turn generation over a causal LM with optional per-conversation KV reuse.

    `store=None` disables reuse (every prompt is encoded in full), on the same code path, so the
    two modes can be compared exactly.
    """

    def __init__(
        self,
        model: Any,
        *,
        eos_token_ids: Sequence[int],
        pad_token_id: int,
        context_window: int | None,
        store: KVCacheStore | None,
        prefill_chunk_tokens: int = DEFAULT_PREFILL_CHUNK_TOKENS,
        packed_linear: bool = True,
    ) -> None:
        if prefill_chunk_tokens < 1:
            raise ValueError(f"prefill_chunk_tokens must be >= 1, got {prefill_chunk_tokens}")
        self.model = model
        self._cache_kwarg = cache_kwarg(model)
        self.eos_token_ids = frozenset(int(t) for t in eos_token_ids)
        self.pad_token_id = int(pad_token_id)
        self.context_window = context_window
        self.store = store
        self.prefill_chunk_tokens = int(prefill_chunk_tokens)
        self.packed_linear = bool(packed_linear)
        self.stats = store.stats if store is not None else CacheStats()
        self._pool = _BufferPool()

    # -- cache management ----------------------------------------------------------------------

    def invalidate(self) -> None:
        """Drop every cached conversation: call it whenever the model's weights change."""
        if self.store is not None:
            self.store.clear()
        self._pool.clear()
        packing.release(self.model)
        self.stats.invalidations += 1

    def forget(self, predicate: Callable[[ConversationKey], bool]) -> int:
        return self.store.forget(predicate) if self.store is not None else 0

    def check_context(
        self,
        prompts: Sequence[Sequence[int]],
        keys: Sequence[ConversationKey | None],
        max_new_tokens: int,
    ) -> None:
        """Raise `ContextWindowExceeded` if any prompt plus `max_new_tokens` outgrows the window."""
        if self.context_window is None:
            return
        over = [
            (i, key, len(p))
            for i, (p, key) in enumerate(zip(prompts, keys, strict=True))
            if len(p) + max_new_tokens > self.context_window
        ]
        if over:
            raise ContextWindowExceeded(
                over, max_new_tokens=max_new_tokens, context_window=self.context_window
            )

    # -- generation ----------------------------------------------------------------------------

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        keys: Sequence[ConversationKey | None] | None = None,
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        logprob_temperature: float = 1.0,
        stop_when: Callable[[list[int]], bool] | None = None,
        repetition_guard: bool = False,
        max_batch_size: int = 64,
        constraints: Sequence[TokenConstraint | None] | None = None,
    ) -> list[Completion]:
        """One completion per prompt; `keys[i]` names its conversation (None: not cached).

        `stop_when(completion_ids)` is asked after each token (that is not EOS) whether the answer
        is complete; `repetition_guard` stops a row whose ids end in `repeating_tail`;
        `constraints[i]` restricts row i's next tokens (module doc). Two prompts of one call must
        not share a key.
        """
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        prompts = [list(map(int, p)) for p in prompts]
        if any(not p for p in prompts):
            raise ValueError("every prompt must hold at least one token")
        keys = list(keys) if keys is not None else [None] * len(prompts)
        if len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        rules = list(constraints) if constraints is not None else [None] * len(prompts)
        if len(rules) != len(prompts):
            raise ValueError(f"{len(rules)} constraints for {len(prompts)} prompts")
        named = [k for k in keys if k is not None]
        if len(set(named)) != len(named):
            raise ValueError("two prompts of one call share a conversation key")
        self.check_context(prompts, keys, max_new_tokens)
        pasts = [self._reusable_past(p, k) for p, k in zip(prompts, keys, strict=True)]
        results: list[Completion | None] = [None] * len(prompts)
        linear = (
            packing.packed_linear(self.model) if self.packed_linear else contextlib.nullcontext()
        )
        with grouped_attention(self.model), linear:
            self._share_prefixes(prompts, pasts, max_batch_size)
            self.stats.full_encodes += sum(past is None for past in pasts)
            for group in self._groups(prompts, pasts, max_batch_size):
                completions, states = self._run(
                    [prompts[i] for i in group],
                    [pasts[i] for i in group],
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    top_k=top_k,
                    logprob_temperature=logprob_temperature,
                    stop_when=stop_when,
                    repetition_guard=repetition_guard,
                    keep_state=[keys[i] is not None and self.store is not None for i in group],
                    constraints=[rules[i] for i in group],
                )
                for i, completion, state in zip(group, completions, states, strict=True):
                    results[i] = completion
                    if state is not None and self.store is not None:
                        self.store.put(keys[i], state)
        self.stats.requests += len(prompts)
        return [r for r in results if r is not None]

    def _reusable_past(self, prompt: list[int], key: ConversationKey | None) -> _Entry | None:
        """The cached prefix of `prompt` for `key` (at least one prompt token is left to feed)."""
        if key is None or self.store is None:
            return None
        entry = self.store.take(key)
        if entry is None:
            return None
        common = common_prefix_length(entry.token_ids, prompt)
        if common < min(len(entry), len(prompt)):
            # The new prompt rewrote part of what was cached (re-rendered history).
            self.stats.prefix_mismatches += 1
        # At least one prompt token must be fed: its logits start the completion.
        common = min(common, len(prompt) - 1)
        if common == 0:
            return None
        self.stats.cache_hits += 1
        return entry if common == len(entry) else entry.cropped(common)

    def _share_prefixes(
        self, prompts: list[list[int]], pasts: list[_Entry | None], max_batch_size: int
    ) -> None:
        """Start every prompt without a cached past from the longest shared prefix it has:
        prefixes cached by earlier calls, and new ones that two or more of these prompts share
        (`plan_shared_prefixes`), each prefilled once, parents first."""
        store = self.store
        if store is None or not store.share_prefixes:
            return
        fresh = [i for i, past in enumerate(pasts) if past is None and len(prompts[i]) > 1]
        if not fresh:
            return
        known = store.prefixes()
        planned = plan_shared_prefixes(
            [prompts[i] for i in fresh], list(known), store.min_shared_tokens
        )
        available = dict(known)

        def longest(ids: Sequence[int], below: int) -> tuple[int, ...] | None:
            """The longest available prefix of `ids` shorter than `below` tokens."""
            best = None
            for prefix in available:
                longer = len(prefix) < below and (best is None or len(prefix) > len(best))
                if longer and starts_with(ids, prefix):
                    best = prefix
            return best

        while planned:
            # A prefix runs once the planned prefixes it extends exist (nested ones wait).
            ready = [
                p for p in planned
                if not any(len(q) < len(p) and starts_with(p, q) for q in planned)
            ]  # fmt: skip
            planned = [p for p in planned if p not in ready]
            parents = [longest(p, len(p)) for p in ready]
            for lo in range(0, len(ready), max_batch_size):
                batch = ready[lo : lo + max_batch_size]
                bases = [
                    available[q].shared_view() if q is not None else None
                    for q in parents[lo : lo + max_batch_size]
                ]
                for prefix, entry in zip(
                    batch, self._encode([list(p) for p in batch], bases), strict=True
                ):
                    available[prefix] = entry
                    store.put(SharedPrefix(prefix), entry)
                    self.stats.prefixes_cached += 1
        for i in fresh:
            prefix = longest(prompts[i], len(prompts[i]))
            if prefix is None:
                continue
            store.touch(SharedPrefix(prefix))
            pasts[i] = available[prefix].shared_view()
            self.stats.shared_prefix_hits += 1
            self.stats.shared_prefix_tokens += len(prefix)

    def _encode(self, prompts: list[list[int]], pasts: list[_Entry | None]) -> list[_Entry]:
        """Each prompt's whole KV (from its past on) as an entry of its own, nothing decoded."""
        # Its own buffers: the pool keeps the last turn's (larger) batch buffers for the next.
        batch = self._prefill(prompts, pasts, spare=0, pool=_BufferPool())
        return [
            _save_row(batch.cache, batch.mask, row, past, batch.past_width, prompt)
            for row, (prompt, past) in enumerate(zip(prompts, pasts, strict=True))
        ]

    def _groups(
        self, prompts: list[list[int]], pasts: list[_Entry | None], max_batch_size: int
    ) -> list[list[int]]:
        """Rows grouped by new-token count so padding stays within `_PADDING_SLACK`."""
        new = [
            len(p) - (len(past) if past is not None else 0)
            for p, past in zip(prompts, pasts, strict=True)
        ]
        order = sorted(range(len(prompts)), key=lambda i: -new[i])
        groups: list[list[int]] = []
        for i in order:
            if groups:
                group = groups[-1]
                widest = new[group[0]]
                real = sum(new[j] for j in group) + new[i]
                if (
                    len(group) < max_batch_size
                    and widest * (len(group) + 1) <= _PADDING_SLACK * real
                ):
                    group.append(i)
                    continue
            groups.append([i])
        return groups

    def _prefill(
        self,
        prompts: list[list[int]],
        pasts: list[_Entry | None],
        spare: int,
        pool: _BufferPool | None = None,
    ) -> _Prefilled:
        """One batch's prompts fed after their pasts, in chunks; the batch cache (buffers from
        `pool`, by default the generator's) keeps `spare` free positions per row."""
        device = self.model.device
        rows = len(prompts)
        past_lens = [len(p) if p is not None else 0 for p in pasts]
        new_ids = [prompt[n:] for prompt, n in zip(prompts, past_lens, strict=True)]
        width = max(len(ids) for ids in new_ids)
        cache, mask = _batch_cache(pasts, self.model, width + spare, pool or self._pool)
        input_ids = torch.full((rows, width), self.pad_token_id, dtype=torch.long)
        new_mask = torch.zeros((rows, width), dtype=torch.long)
        positions = torch.zeros((rows, width), dtype=torch.long)
        for row, ids in enumerate(new_ids):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            new_mask[row, width - len(ids) :] = 1
            positions[row, width - len(ids) :] = torch.arange(
                past_lens[row], past_lens[row] + len(ids)
            )
        self.stats.prefill_tokens += sum(len(ids) for ids in new_ids)
        self.stats.reused_tokens += sum(past_lens)

        # Chunked prefill: the same math as one pass, with attention memory bounded.
        started = time.perf_counter()
        chunk = max(1, self.prefill_chunk_tokens // rows)
        logits = None
        for lo in range(0, width, chunk):
            hi = min(width, lo + chunk)
            mask = torch.cat([mask, new_mask[:, lo:hi]], dim=1)
            out = self.model(
                input_ids=input_ids[:, lo:hi].to(device),
                attention_mask=mask.to(device),
                position_ids=positions[:, lo:hi].to(device),
                **{self._cache_kwarg: cache},
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
            logits = out.logits[:, -1]
        assert logits is not None
        if logits.device.type == "cuda":
            torch.cuda.synchronize(logits.device)
        self.stats.prefill_seconds += time.perf_counter() - started
        return _Prefilled(cache, mask, logits, past_lens, new_ids)

    def _run(
        self,
        prompts: list[list[int]],
        pasts: list[_Entry | None],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        top_k: int,
        logprob_temperature: float,
        stop_when: Callable[[list[int]], bool] | None,
        repetition_guard: bool,
        keep_state: list[bool],
        constraints: list[TokenConstraint | None],
    ) -> tuple[list[Completion], list[_Entry | None]]:
        batch = self._prefill(prompts, pasts, spare=max_new_tokens)
        cache, mask, logits = batch.cache, batch.mask, batch.logits
        device = self.model.device
        rows = len(prompts)
        past_lens, new_ids, past_width = batch.past_lens, batch.new_ids, batch.past_width
        prefilled = time.perf_counter()

        next_position = torch.tensor(
            [n + len(ids) for n, ids in zip(past_lens, new_ids, strict=True)], dtype=torch.long
        )
        completions = [Completion([]) for _ in range(rows)]
        states: list[_Entry | None] = [None] * rows
        cached_ids = [list(p) for p in prompts]  # token ids whose KV the cache holds, per row
        active = list(range(rows))  # batch position -> original row
        alive = list(range(rows))  # batch positions still decoding (the others idle in place)
        while True:
            logits32 = logits.float()
            if len(alive) < len(active):
                logits32 = logits32[torch.tensor(alive, dtype=torch.long, device=logits32.device)]
            forced: set[int] = set()
            if any(constraints):
                logits32, forced = _constrained(
                    logits32,
                    [constraints[active[pos]] for pos in alive],
                    [completions[active[pos]].ids for pos in alive],
                )
            chosen = self._pick(logits32, temperature, top_p, top_k)
            logprobs = torch.log_softmax(logits32 / logprob_temperature, dim=-1)
            chosen_lp = logprobs.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
            chosen_ids = chosen.tolist()
            still: list[int] = []
            for j, pos in enumerate(alive):
                row = active[pos]
                token = int(chosen_ids[j])
                completion = completions[row]
                completion.ids.append(token)
                completion.logprobs.append(float(chosen_lp[j]))
                completion.forced.append(j in forced)
                if token in self.eos_token_ids:
                    completion.finish_reason = "eos"
                elif stop_when is not None and stop_when(completion.ids):
                    completion.finish_reason = "answer"
                elif repetition_guard and repeating_tail(completion.ids):
                    completion.finish_reason = "repetition"
                elif len(completion.ids) >= max_new_tokens:
                    completion.finish_reason = "length"
                else:
                    still.append(pos)
                    continue
                if keep_state[row]:
                    states[row] = _save_row(
                        cache, mask, pos, pasts[row], past_width, cached_ids[row]
                    )
            if not still:
                break
            if len(still) <= _COMPACT_AT * len(active):
                # Compacting copies every remaining row's cache, so finished rows first idle in
                # the batch (fed a pad token, outputs ignored) until half of it is idle.
                index = torch.tensor(still, dtype=torch.long)
                cache.batch_select_indices(index.to(device))
                mask = mask[index]
                next_position = next_position[index]
                active = [active[pos] for pos in still]
                still = list(range(len(still)))
            alive = still
            step_ids = torch.full((len(active),), self.pad_token_id, dtype=torch.long)
            for pos in alive:
                token = completions[active[pos]].ids[-1]
                step_ids[pos] = token
                cached_ids[active[pos]].append(token)
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
            out = self.model(
                input_ids=step_ids.unsqueeze(1).to(device),
                attention_mask=mask.to(device),
                position_ids=next_position.unsqueeze(1).to(device),
                **{self._cache_kwarg: cache},
                use_cache=True,
            )
            cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
            logits = out.logits[:, -1]
            next_position = next_position + 1
            self.stats.decode_tokens += len(alive)
        self.stats.decode_seconds += time.perf_counter() - prefilled
        # The batch buffers serve the next call; the states own their memory.
        self._pool.give([t for layer in cache.layers for t in (layer._k, layer._v)])
        return completions, states

    @staticmethod
    def _pick(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
        if temperature <= 0:
            return logits.argmax(dim=-1)
        scaled = logits / temperature
        if top_k and top_k > 0:
            kth = torch.topk(scaled, min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        if top_p < 1.0:
            sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
            cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
            # Keep the smallest set whose mass reaches top_p (the first token always stays).
            drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            scaled = torch.full_like(scaled, float("-inf")).scatter(1, order, sorted_logits)
        probs = torch.softmax(scaled, dim=-1)
        return torch.multinomial(probs, 1).squeeze(1)
