"""`agents.llm.packed_linear`: linear layers through weights packed once give `F.linear`'s values.

The contract is about which calls take the packed product (CPU, no gradients, fp32/bf16, exact
`nn.Linear`), that a changed weight is packed again (never a stale copy), that a failure falls
back to `F.linear` with one warning, and that the block leaves every module as it found it; the
values must match `F.linear` up to float rounding, layer by layer and through the bundled
model's decoding.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tomgym.agents.llm import packed_linear  # noqa: E402
from tomgym.agents.llm.packed_linear import packed_linear as packed_block  # noqa: E402

from tests.agents.engines import bundled_model, same_decoding_either_way  # noqa: E402

TOLERANCE = 1e-4

pytestmark = pytest.mark.skipif(
    not packed_linear.available(), reason="this torch has no oneDNN packed linear products"
)


class _Counting(torch.nn.Linear):
    """A Linear subclass (as quantised or adapter layers are): the block must leave it alone."""


def _net(dtype: Any = None) -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(16, 48),
        torch.nn.GELU(),
        torch.nn.Linear(48, 16, bias=False),
        _Counting(16, 8),
    )
    return net.to(dtype) if dtype is not None else net


@pytest.fixture
def packed_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The output shapes of every packed product (the real op still runs)."""
    calls: list[tuple[int, ...]] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counting(x: Any, weight: Any, *rest: Any) -> Any:
        out = real(x, weight, *rest)
        calls.append(tuple(out.shape))
        return out

    monkeypatch.setattr(packed_linear.torch.ops.mkldnn, "_linear_pointwise", counting)
    return calls


@pytest.mark.parametrize(
    "shape", [(1, 16), (2, 16), (8, 1, 16), (4, 3, 16), (64, 16), (300, 16), (3, 40, 16)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_values_equal_f_linear_for_every_shape_and_dtype(
    shape: tuple[int, ...], dtype: Any, packed_calls: list[tuple[int, ...]]
) -> None:
    net = _net(dtype)
    x = torch.randn(*shape, dtype=dtype)
    with torch.no_grad():
        expected = net(x)
        with packed_block(net):
            got = net(x)
    assert len(packed_calls) == 2  # both plain Linear layers took the packed product
    assert got.shape == expected.shape and got.dtype == dtype
    tolerance = TOLERANCE if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, atol=tolerance, rtol=tolerance)


def test_only_cpu_inference_on_plain_linear_layers_takes_the_packed_product(
    packed_calls: list[tuple[int, ...]],
) -> None:
    net = _net()
    with packed_block(net) as patched:
        assert patched == 2  # the two plain Linear layers, not the subclass
        with torch.no_grad():
            net(torch.randn(4, 16))
            assert packed_calls == [(4, 48), (4, 16)]  # the subclass kept F.linear
            packed_calls.clear()
            net.double()(torch.randn(4, 16, dtype=torch.float64))  # fp64: F.linear
            net.float()
            assert packed_calls == []
        out = net(torch.randn(4, 16))  # gradients on (training): F.linear and its autograd
        out.sum().backward()
        assert packed_calls == [] and net[0].weight.grad is not None
        with torch.inference_mode():
            net(torch.randn(2, 16))
        assert len(packed_calls) == 2


def test_a_changed_weight_is_packed_again_never_used_stale(
    packed_calls: list[tuple[int, ...]],
) -> None:
    net = _net()
    x = torch.randn(5, 16)

    def packed_and_reference() -> tuple[Any, Any]:
        with torch.no_grad():
            packed = net(x)
        with torch.enable_grad():  # gradients on: F.linear with the weights as they are now
            return packed, net(x).detach()

    with packed_block(net):
        before, _ = packed_and_reference()  # packs every weight
        optimiser = torch.optim.SGD(net.parameters(), lr=0.5)
        net(x).square().sum().backward()
        optimiser.step()  # in place, as in training
        stepped, reference = packed_and_reference()
        assert not torch.allclose(stepped, before, atol=1e-3)  # the step did change the output
        torch.testing.assert_close(stepped, reference, atol=TOLERANCE, rtol=TOLERANCE)
        net.load_state_dict(_net().state_dict())  # a checkpoint loaded in place
        reloaded, reference = packed_and_reference()
        torch.testing.assert_close(reloaded, reference, atol=TOLERANCE, rtol=TOLERANCE)
        net[0].weight = torch.nn.Parameter(torch.randn(48, 16))  # a replaced tensor
        replaced, reference = packed_and_reference()
        torch.testing.assert_close(replaced, reference, atol=TOLERANCE, rtol=TOLERANCE)
    assert len(packed_calls) == 8  # every no-grad call above took the packed product


def test_release_drops_the_packed_weights() -> None:
    net = _net()
    with packed_block(net), torch.no_grad():
        net(torch.randn(3, 16))
    assert packed_linear.release(net) == 2
    assert packed_linear.release(net) == 0


def test_a_failing_packed_product_warns_once_and_keeps_f_linears_values(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("no oneDNN kernel for this CPU")

    monkeypatch.setattr(packed_linear.torch.ops.mkldnn, "_linear_pointwise", broken)
    monkeypatch.setattr(packed_linear, "_failures", {})
    net = _net()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = net(x)
        with caplog.at_level(logging.WARNING, logger=packed_linear.__name__), packed_block(net):
            first, second = net(x), net(x)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)
    warnings = [r for r in caplog.records if "packed CPU linear layers are off" in r.message]
    assert len(warnings) == 1 and "no oneDNN kernel for this CPU" in warnings[0].message
    assert not packed_linear.available(torch.float32)
    assert packed_linear.available(torch.bfloat16)  # one dtype's failure leaves the others on


def test_a_wrong_input_raises_its_own_error_and_leaves_packing_on() -> None:
    net = _net()
    with packed_block(net), torch.no_grad(), pytest.raises(RuntimeError):
        net(torch.randn(4, 15))  # 15 features for a 16-feature layer
    assert packed_linear.available()


def test_the_block_restores_exactly_what_it_patched_and_nests() -> None:
    net = _net()
    plain = [m for m in net if type(m) is torch.nn.Linear]
    with packed_block(net) as outer:
        assert outer == 2
        assert all("forward" in vars(m) for m in plain)
        with packed_block(net) as inner:
            assert inner == 0
        assert all("forward" in vars(m) for m in plain)  # the inner block removed nothing
    assert all("forward" not in vars(m) for m in net)
    with pytest.raises(RuntimeError), packed_block(net):
        raise RuntimeError("an error inside the block")
    assert all("forward" not in vars(m) for m in net)
    assert "_packed" not in str(list(net.state_dict()))  # nothing serialised with the model


def test_bundled_model_decodes_the_same_with_either_product(loaded: tuple[Any, Any]) -> None:
    model, tokenizer = loaded
    texts = ("Name a city in France.", "What is 2 + 2?", "Say hello to Ana.", "Hi!")
    same_decoding_either_way(model, tokenizer, texts, max_new_tokens=24, tolerance=TOLERANCE)
    assert all("forward" not in vars(m) for m in model.modules())


class _Tiny(torch.nn.Module):
    """Named projections for PEFT to wrap (LoRA on `q` and `v`, `o` left plain)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(16, 32)
        self.v = torch.nn.Linear(32, 16, bias=False)
        self.o = torch.nn.Linear(16, 8)

    def forward(self, x: Any) -> Any:
        return self.o(self.v(torch.relu(self.q(x))))


def _lora_net(dropout: float = 0.0, **options: Any) -> Any:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=dropout,
        target_modules=["q", "v"],
        init_lora_weights=False,  # random B: the adapters change the output
        **options,
    )
    return peft.get_peft_model(_Tiny(), config)


def _reference(net: Any, x: Any, **kwargs: Any) -> Any:
    with torch.enable_grad():  # gradients on: PEFT's own forward and F.linear
        return net(x, **kwargs).detach()


def test_lora_layers_take_one_packed_product_with_their_adapters_merged_aside(
    packed_calls: list[tuple[int, ...]],
) -> None:
    net = _lora_net().eval()
    x = torch.randn(6, 16)
    base_before = net.base_model.model.q.base_layer.weight.clone()
    with packed_block(net) as patched, torch.no_grad():
        got = net(x)
    assert patched == 2 + 2 * 3 + 1  # two LoRA layers, their base, A and B layers, and `o`
    assert packed_calls == [(6, 32), (6, 16), (6, 8)]  # one product a LoRA layer, then `o`
    torch.testing.assert_close(got, _reference(net, x), atol=TOLERANCE, rtol=TOLERANCE)
    assert torch.equal(net.base_model.model.q.base_layer.weight, base_before)  # never merged in


def test_lora_layers_are_packed_again_after_an_adapter_update() -> None:
    net = _lora_net().eval()
    x = torch.randn(5, 16)
    with packed_block(net):
        with torch.no_grad():
            before = net(x)
        optimiser = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.5)
        net(x).square().sum().backward()
        optimiser.step()  # only the adapters train: the base weights keep their version
        with torch.no_grad():
            after = net(x)
        assert not torch.allclose(after, before, atol=1e-3)
        torch.testing.assert_close(after, _reference(net, x), atol=TOLERANCE, rtol=TOLERANCE)
        with net.disable_adapter(), torch.no_grad():
            torch.testing.assert_close(
                net(x), _reference(net.base_model.model, x), atol=TOLERANCE, rtol=TOLERANCE
            )


def test_lora_layers_keep_pefts_forward_where_one_product_would_differ(
    packed_calls: list[tuple[int, ...]],
) -> None:
    x = torch.randn(3, 16)
    net = _lora_net(dropout=0.5).train()  # dropout active: PEFT's path, three products
    with packed_block(net), torch.no_grad():
        net(x)
    assert len(packed_calls) == 3 * 2 + 1
    packed_calls.clear()
    net.eval()  # dropout off in eval mode: one product again
    with packed_block(net), torch.no_grad():
        torch.testing.assert_close(net(x), _reference(net, x), atol=TOLERANCE, rtol=TOLERANCE)
    assert len(packed_calls) == 3
    packed_calls.clear()
    dora = _lora_net(use_dora=True).eval()
    with packed_block(dora), torch.no_grad():
        torch.testing.assert_close(dora(x), _reference(dora, x), atol=TOLERANCE, rtol=TOLERANCE)
    assert len(packed_calls) > 3  # DoRA is a variant: not folded into one product


def test_bundled_model_with_lora_decodes_the_same_either_way() -> None:
    peft = pytest.importorskip("peft")
    model, tokenizer = bundled_model()
    torch.manual_seed(0)
    config = peft.LoraConfig(
        r=8,
        lora_alpha=16,
        target_modules=["q_proj", "v_proj", "down_proj"],
        init_lora_weights=False,
    )
    model = peft.get_peft_model(model, config).eval()
    for name, parameter in model.named_parameters():
        if "lora_B" in name:  # small, so the adapted model still writes text
            parameter.data.mul_(0.05)
    texts = ("Name a city in France.", "Say hello to Ana.")
    same_decoding_either_way(model, tokenizer, texts, max_new_tokens=16, tolerance=TOLERANCE)
