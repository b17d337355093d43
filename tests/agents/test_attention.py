"""`agents.llm.attention`: grouped-query attention without KV expansion equals transformers' sdpa.

The bundled SmolLM2-135M has 9 query heads over 3 KV heads, so it exercises the grouping; the
batches have left-padding holes, as `CachedGenerator`'s do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tomgym.agents.llm.attention import GROUPED_SDPA, grouped_attention  # noqa: E402

from tests.agents.engines import bundled_model  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def model() -> Iterator[Any]:
    loaded, _ = bundled_model()
    assert loaded.config.num_key_value_heads < loaded.config.num_attention_heads
    assert loaded.config._attn_implementation == "sdpa"
    yield loaded


def _holey_batch() -> tuple[Any, Any]:
    ids = torch.tensor([[11, 12, 13, 14, 15, 16], [0, 0, 0, 21, 22, 23], [0, 31, 32, 33, 34, 35]])
    mask = (ids != 0).long()
    return ids, mask


def _prefill_then_decode(model: Any) -> tuple[Any, Any]:
    ids, mask = _holey_batch()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache = out.past_key_values
    step = torch.tensor([[7], [8], [9]])
    mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=1)
    nxt = model(
        input_ids=step,
        attention_mask=mask,
        position_ids=positions[:, -1:] + 1,
        past_key_values=cache,
        use_cache=True,
    )
    return out.logits, nxt.logits


def test_grouped_attention_equals_sdpa_in_prefill_and_decode(model: Any) -> None:
    with torch.inference_mode():
        ref_prefill, ref_decode = _prefill_then_decode(model)
        with grouped_attention(model):
            assert model.config._attn_implementation == GROUPED_SDPA
            prefill, decode = _prefill_then_decode(model)
    assert model.config._attn_implementation == "sdpa"
    real = _holey_batch()[1].bool()
    assert (prefill - ref_prefill)[real].abs().max().item() < TOLERANCE
    assert (decode - ref_decode).abs().max().item() < TOLERANCE
    assert torch.equal(decode.argmax(-1), ref_decode.argmax(-1))


def test_training_forward_is_stock_sdpa_bit_for_bit(model: Any) -> None:
    ids, mask = _holey_batch()
    ref = model(input_ids=ids, attention_mask=mask).logits
    with grouped_attention(model):
        out = model(input_ids=ids, attention_mask=mask).logits
    assert out.requires_grad and torch.equal(out, ref)


def test_setting_is_restored_after_an_error_and_other_implementations_are_left_alone(
    model: Any,
) -> None:
    with pytest.raises(RuntimeError, match="boom"), grouped_attention(model):
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"
    model.config._attn_implementation = "eager"
    try:
        with grouped_attention(model):
            assert model.config._attn_implementation == "eager"
    finally:
        model.config._attn_implementation = "sdpa"


def test_bf16_decode_on_a_strided_cache_view_matches_fp32() -> None:
    """The bf16 decode product reads the keys as the left operand (no copy of the engine's
    growing buffers); its output is fp32's up to bf16 rounding, padding holes included."""
    from tomgym.agents.llm.attention import _grouped_decode

    gen = torch.Generator().manual_seed(0)
    batch, kv_heads, groups, dim, capacity, length = 2, 3, 3, 8, 16, 5
    keys = torch.randn(batch, kv_heads, capacity, dim, generator=gen)
    values = torch.randn(batch, kv_heads, capacity, dim, generator=gen)
    query = torch.randn(batch, kv_heads * groups, 1, dim, generator=gen)
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    mask[1, ..., :2] = False  # a left-padded row
    reference = _grouped_decode(query, keys[:, :, :length], values[:, :, :length], mask, None)
    low = _grouped_decode(
        query.bfloat16(),
        keys.bfloat16()[:, :, :length],
        values.bfloat16()[:, :, :length],
        mask,
        None,
    )
    assert low.dtype == torch.bfloat16 and low.shape == reference.shape == (batch, 1, 9, dim)
    assert (low.float() - reference).abs().max().item() < 0.05
    # The holes are holes: the padded row equals attention over its real positions alone.
    alone = _grouped_decode(query[1:], keys[1:, :, 2:length], values[1:, :, 2:length], None, None)
    assert (reference[1:] - alone).abs().max().item() < 1e-5


def test_a_peft_wrapped_model_attends_through_the_grouped_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PEFT's causal-LM wrapper passes `output_hidden_states` down to attention: inference must
    still take the grouped path (no KV copy, the decode kernel), not fall back to stock sdpa."""
    peft = pytest.importorskip("peft")
    import transformers.integrations.sdpa_attention as stock

    fresh, _ = bundled_model()
    config = peft.LoraConfig(r=4, target_modules=["q_proj"], task_type="CAUSAL_LM")
    wrapped = peft.get_peft_model(fresh, config)  # as the trainer and adapter policies build it
    stock_calls: list[int] = []
    real = stock.sdpa_attention_forward

    def counting(*args: Any, **kwargs: Any) -> Any:
        stock_calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stock, "sdpa_attention_forward", counting)
    with torch.inference_mode():
        ref_prefill, ref_decode = _prefill_then_decode(wrapped)
        with grouped_attention(wrapped):  # a fallback inside it would call `counting`
            prefill, decode = _prefill_then_decode(wrapped)
    assert stock_calls == []
    real_rows = _holey_batch()[1].bool()
    assert (prefill - ref_prefill)[real_rows].abs().max().item() < TOLERANCE
    assert (decode - ref_decode).abs().max().item() < TOLERANCE
