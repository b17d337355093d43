"""`agents.llm.small_batch`: a decode step's linear layers as `weight @ x.T` give `F.linear`'s values.

The contract is about which calls take the other product (2-64 rows, CPU, no gradients, exact
`nn.Linear`) and that the block leaves every module as it found it; the values must match
`F.linear` up to float rounding, layer by layer and through the bundled model's decoding.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tomgym.agents.llm import small_batch  # noqa: E402
from tomgym.agents.llm.small_batch import SMALL_BATCH_ROWS, small_batch_linear  # noqa: E402

from tests.agents.engines import chat_prompts, uncached_engine  # noqa: E402

TOLERANCE = 1e-4


class _Counting(torch.nn.Linear):
    """A Linear subclass (as quantised or adapter layers are): the block must leave it alone."""


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 48),
        torch.nn.GELU(),
        torch.nn.Linear(48, 16, bias=False),
        _Counting(16, 8),
    )


@pytest.mark.parametrize(
    "shape", [(1, 16), (2, 16), (8, 1, 16), (4, 3, 16), (64, 16), (65, 16), (3, 40, 16)]
)
def test_values_equal_f_linear_for_every_row_count(shape: tuple[int, ...]) -> None:
    net = _net()
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = net(x)
        with small_batch_linear(net):
            got = net(x)
    assert got.shape == expected.shape
    assert got.is_contiguous()
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=TOLERANCE)


def test_only_small_inference_batches_of_plain_linear_layers_take_the_other_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real_mm = torch.mm

    def counting_mm(a: Any, b: Any) -> Any:
        calls.append(a.shape[0])
        return real_mm(a, b)

    monkeypatch.setattr(small_batch.torch, "mm", counting_mm)
    real_addmm = torch.addmm

    def counting_addmm(bias: Any, a: Any, b: Any) -> Any:
        calls.append(a.shape[0])
        return real_addmm(bias, a, b)

    monkeypatch.setattr(small_batch.torch, "addmm", counting_addmm)
    net = _net()
    with small_batch_linear(net) as patched:
        assert patched == 2  # the two plain Linear layers, not the subclass
        with torch.no_grad():
            net(torch.randn(4, 16))
            assert calls == [48, 16]  # (out, in) weights on the left, subclass untouched
            calls.clear()
            net(torch.randn(1, 16))  # one row: BLAS's matrix-vector product already
            net(torch.randn(max(SMALL_BATCH_ROWS) + 1, 16))  # a prefill
            assert calls == []
        net(torch.randn(4, 16)).sum().backward()  # training keeps F.linear (and its autograd)
        assert calls == []


def test_the_block_restores_exactly_what_it_patched_and_nests() -> None:
    net = _net()
    plain = [m for m in net if type(m) is torch.nn.Linear]
    with small_batch_linear(net) as outer:
        assert outer == 2
        assert all("forward" in vars(m) for m in plain)
        with small_batch_linear(net) as inner:
            assert inner == 0
        assert all("forward" in vars(m) for m in plain)  # the inner block removed nothing
    assert all("forward" not in vars(m) for m in net)
    with pytest.raises(RuntimeError), small_batch_linear(net):
        raise RuntimeError("an error inside the block")
    assert all("forward" not in vars(m) for m in net)


def test_bundled_model_decodes_the_same_with_either_product(loaded: tuple[Any, Any]) -> None:
    model, tokenizer = loaded
    texts = ("Name a city in France.", "What is 2 + 2?", "Say hello to Ana.", "Hi!")
    prompts = chat_prompts(tokenizer, texts)
    slow, fast = (
        uncached_engine(model, tokenizer, small_batch_linear=on).generate(
            prompts, max_new_tokens=24
        )
        for on in (False, True)
    )
    assert all("forward" not in vars(m) for m in model.modules())
    for a, b in zip(slow, fast, strict=True):
        assert b.ids == a.ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < TOLERANCE
