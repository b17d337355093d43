"""Grouped-query attention for batched inference over a padded KV cache, without copying it.

transformers' `sdpa` attention expands the key/value heads of a grouped-query model (SmolLM2-135M:
9 query heads over 3 KV heads) with `repeat_kv` whenever an attention mask is given and the
device is not CUDA, so every layer of every decode step copies the whole KV cache three times.
`CachedGenerator` always passes a mask (its batch cache has holes), and at 32 concurrent games
that copy, not the matrix products, dominated decoding on CPU (`bench/bench_rollout.py`).

`grouped_sdpa_forward` is a transformers attention function (registered as `GROUPED_SDPA` in
`AttentionInterface`, with `sdpa`'s mask builder in `AttentionMaskInterface`). Contract:

- With gradients enabled (training, TRL's loss), with dropout or with any argument beyond the
  plain ones, it is stock `sdpa_attention_forward`, call for call: training is unchanged.
- Inference, one query token (decode): fp32 on CPU runs the compiled kernel of
  `decode_kernel` (each KV head's keys and values read once for its query heads) where it
  builds; otherwise, and in other dtypes or devices, the query heads of each KV head attend to
  that head's keys in one batched matrix product, softmax in float32, no expanded copy (in
  bf16/fp16 on CPU the product is written keys-first, which reads a strided cache view in place).
- Inference, several query tokens (prefill) with a mask: torch's SDPA with `enable_gqa=True`.
- Outputs equal `sdpa`'s up to float rounding (`tests/agents/test_attention.py`).

`grouped_attention(model)` switches a model whose attention is `sdpa` to it for the duration of
a `with` block (the setting is not serialised, and any other implementation is left alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from tomgym.agents.llm import decode_kernel

GROUPED_SDPA = "tomgym_grouped_sdpa"
"""Name of the attention implementation in transformers' registries."""

# Keywords that do not change what attention computes. PEFT's model wrapper forwards
# `output_hidden_states` down to every layer: without it here, adapter rollouts and evaluations
# fell back to stock sdpa (KV copied per head group, no decode kernel).
_PLAIN_KWARGS = frozenset(
    {"position_ids", "cache_position", "output_attentions", "output_hidden_states", "use_cache"}
)
_registered = False


def _grouped_decode(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float | None,
) -> torch.Tensor:
    """Attention of one query token per row; query (b, h, 1, d), key/value (b, kv, L, d);
    returns (b, 1, h, d) like `sdpa_attention_forward`."""
    batch, heads, _, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    scale = scaling if scaling is not None else dim**-0.5
    if decode_kernel.supports(query, key, value, mask):
        module = decode_kernel.kernel()
        if module is not None:
            return decode_kernel.decode_attention(query, key, value, mask, scale, module)
    # Query head h reads KV head h // groups (the order `repeat_kv` expands them in).
    grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    if key.dtype == torch.float32 or key.device.type != "cpu":
        scores = torch.matmul(grouped, key.transpose(-1, -2))
    else:
        # torch's CPU bf16/fp16 batched product copies a transposed right operand whose batch
        # stride is not its length (the engine's growing cache buffers) before multiplying; as
        # the left operand the keys are read in place (docs/llm.md: 16 -> 7 ms a layer, 32
        # games, 2,000 cached tokens). fp32 is left as it was: there both run alike.
        scores = torch.matmul(key, grouped.transpose(-1, -2)).transpose(-1, -2)
    # In place after the conversion: each step of a 32-game batch would otherwise allocate and
    # fill three more score tensors per layer.
    scores = scores.to(torch.float32, memory_format=torch.contiguous_format).mul_(scale)
    if mask is not None:
        row_mask = mask.reshape(mask.shape[0], 1, 1, length)
        if row_mask.dtype == torch.bool:
            scores.masked_fill_(row_mask.logical_not(), float("-inf"))
        else:
            scores.add_(row_mask.float())
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # (b, kv, groups, d)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous()


def grouped_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: `sdpa` without the KV expansion in inference."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    plain = dropout == 0.0 and not (set(kwargs) - _PLAIN_KWARGS)
    if (
        torch.is_grad_enabled()
        or not plain
        or groups <= 1
        or key.shape[1] * groups != query.shape[1]
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[2] == 1:
        return _grouped_decode(query, key, value, attention_mask, scaling), None
    if attention_mask is None:  # causal prefill: stock sdpa already uses enable_gqa here
        return sdpa_attention_forward(module, query, key, value, None, scaling=scaling, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register `GROUPED_SDPA` with transformers (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GROUPED_SDPA, grouped_sdpa_forward)
    AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)
    _registered = True


@contextlib.contextmanager
def grouped_attention(model: Any) -> Iterator[None]:
    """Within the block, a model using `sdpa` attends with `grouped_sdpa_forward`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    register()
    config._attn_implementation = GROUPED_SDPA
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
