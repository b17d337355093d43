"""Inference linear layers on CPU with weights packed once for oneDNN.

`torch.nn.Linear` on CPU hands its weight to the BLAS in its stored (out, in) layout, and the
BLAS re-packs it into cache-sized panels on every call. Inference multiplies the same weights
thousands of times, so `packed_linear(model)` reorders each weight once into oneDNN's blocked
layout (`torch.ops.mkldnn._reorder_linear_weight`, what torch's inductor does for frozen CPU
models) and multiplies with `torch.ops.mkldnn._linear_pointwise`. Measured on a 2-core AMD EPYC
(AVX-512, torch 2.13 CPU, 2 threads, fp32), packed against `F.linear`: the bundled model's
49,152 x 576 output layer 11.5 -> 5.9 ms at one row, 31 -> 11 ms at 32 and 847 -> 660 ms at
2,048; its MLP layers 1.4-2x faster at 1-64 rows and 1.2-1.4x at 2,048; only the small 576 x
192 key/value projections are equal or slower (11 -> 21 us at one row). A decode step is
1.38x / 1.69x / 1.13x faster at 1 / 8 / 32 games (`bench/bench_decode_step.py --compare
linear`); docs/llm.md has the rest.

Contract of `packed_linear(model)` (a `with` block, used by `kv_cache.CachedGenerator` around
generation):
- Within the block, every module of exact type `torch.nn.Linear` called on CPU with gradients
  disabled, with input and weight both float32 or both bfloat16, multiplies by its packed
  weight; every other call (training, GPU, other dtypes) is `F.linear`, call for call. Results
  equal `F.linear`'s up to float rounding (`tests/agents/test_packed_linear.py`).
- A weight is packed on its first packed call and kept (in a weak map: nothing is added to the
  module or to its `state_dict`) until it changes: an in-place update (an optimiser step,
  `load_state_dict`) bumps the tensor's version and a replaced tensor has another address, and
  either repacks it on the next call, so a stale packed weight is never used. `release(model)`
  drops a model's packed weights (the engine does it in `invalidate`). Packed copies cost about
  the linear weights' size again in memory while they are held.
- Where this torch has no oneDNN, nothing is patched. Where packing or the packed product fails
  for a dtype (bf16 on a CPU oneDNN has no bf16 code for, say), one warning names the cause and
  every later call in that dtype is `F.linear`: the numbers stay right, only slower.
- PEFT LoRA layers (exact `peft.tuners.lora.layer.Linear`, unmerged, plain LoRA: no DoRA or
  other variant, no LoRA bias, no dropout that is active) multiply by one packed weight, the
  base weight plus every active adapter's `get_delta_weight` (what `merge_adapter` would write,
  computed aside: the base weight is never modified), in one product instead of three plus
  PEFT's bookkeeping; packed again when the base weight or any adapter weight changes. A call
  with extra arguments (`adapter_names=`, ...) or any other case is PEFT's own forward.
- Subclasses of `Linear` (quantised layers) and modules whose `forward` is already replaced on
  the instance (e.g. accelerate's hooks) are left alone; nested blocks patch nothing twice;
  leaving the block restores exactly the modules it patched.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import types
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

PACKED_DTYPES = (torch.float32, torch.bfloat16)
"""Input/weight dtypes multiplied through a packed weight (measured faster, or equal, on CPU)."""

# module -> (signature of the weights it was packed from, packed weight)
_packed: weakref.WeakKeyDictionary[torch.nn.Module, tuple[Any, Any]] = weakref.WeakKeyDictionary()
# dtype -> why its packed products are off in this process
_failures: dict[torch.dtype, str] = {}


def available(dtype: torch.dtype = torch.float32) -> bool:
    """Whether packed products can run here in `dtype` (this torch has oneDNN, the dtype is one
    of `PACKED_DTYPES` and its products have not failed)."""
    return (
        dtype in PACKED_DTYPES
        and dtype not in _failures
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def _disable(dtype: torch.dtype, error: BaseException) -> None:
    _failures[dtype] = f"{type(error).__name__}: {error}"
    for module in [m for m, (_, packed) in _packed.items() if packed.dtype == dtype]:
        del _packed[module]
    logger.warning(
        "packed CPU linear layers are off for %s (%s); using F.linear",
        str(dtype).removeprefix("torch."),
        _failures[dtype],
    )


def _signature(weight: torch.Tensor) -> tuple[int, int, torch.dtype]:
    try:
        version = weight._version
    except RuntimeError:  # an inference tensor has no version counter: it cannot change
        version = -1
    return weight.data_ptr(), version, weight.dtype


def _packed_weight(module: torch.nn.Module, signature: Any, compute_weight: Any) -> Any:
    """`compute_weight()` in oneDNN's layout, packed again when `signature` changed since last
    time (the weight is only computed then)."""
    held = _packed.get(module)
    if held is not None and held[0] == signature:
        return held[1]
    # A normal tensor even inside `inference_mode`, so later no-grad calls may use it too.
    with torch.inference_mode(False), torch.no_grad():
        weight = compute_weight().detach().contiguous()
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
    _packed[module] = (signature, packed)
    return packed


def _packable(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    return (
        not torch.is_grad_enabled()
        and x.device.type == "cpu"
        and weight.device.type == "cpu"
        and x.dtype in PACKED_DTYPES
        and x.dtype not in _failures
        and weight.dtype == x.dtype
        and (bias is None or bias.dtype == x.dtype)
    )


def _packed_product(
    module: torch.nn.Module,
    x: torch.Tensor,
    signature: Any,
    compute_weight: Any,
    bias: torch.Tensor | None,
    fallback: Any,
) -> torch.Tensor:
    try:
        packed = _packed_weight(module, signature, compute_weight)
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    except RuntimeError as error:
        # A wrong input raises the same error from the fallback (the caller's to handle) and
        # leaves packing on; only a failure of the packed path itself switches it off.
        result = fallback()
        _disable(x.dtype, error)
        return result


def _packed_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`nn.Linear.forward` through the packed weight where the contract allows it."""
    weight, bias = self.weight, self.bias
    if not _packable(x, weight, bias):
        return F.linear(x, weight, bias)
    return _packed_product(
        self, x, _signature(weight), lambda: weight, bias, lambda: F.linear(x, weight, bias)
    )


def _lora_adapters(layer: Any, x: torch.Tensor) -> list[str] | None:
    """The active adapters of a PEFT LoRA layer if one merged product may stand for them."""
    if layer.disable_adapters or layer.merged:
        return None
    adapters = [a for a in layer.active_adapters if a in layer.lora_A]
    for adapter in adapters:
        dropout = layer.lora_dropout[adapter]
        if (
            adapter in getattr(layer, "lora_variant", {})
            or layer.lora_B[adapter].bias is not None
            or layer.lora_A[adapter].weight.dtype != x.dtype
            or (layer.training and getattr(dropout, "p", 0.0) > 0.0)
        ):
            return None
    return adapters


def _packed_lora_forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """PEFT `lora.Linear.forward` as one product by base + adapter deltas where allowed."""
    base = self.base_layer
    adapters = None if args or kwargs else _lora_adapters(self, x)
    if adapters is None or not _packable(x, base.weight, base.bias):
        return type(self).forward(self, x, *args, **kwargs)
    signature = (
        _signature(base.weight),
        tuple(
            (
                a,
                _signature(self.lora_A[a].weight),
                _signature(self.lora_B[a].weight),
                self.scaling[a],
            )
            for a in adapters
        ),
    )

    def merged() -> torch.Tensor:
        weight = base.weight
        for adapter in adapters:
            weight = weight + self.get_delta_weight(adapter).to(weight.dtype)
        return weight

    return _packed_product(
        self, x, signature, merged, base.bias, lambda: type(self).forward(self, x)
    )


def release(model: Any) -> int:
    """Drop the packed weights of `model`'s modules; returns how many were held."""
    modules = model.modules() if isinstance(model, torch.nn.Module) else ()
    return sum(_packed.pop(module, None) is not None for module in modules)


@contextlib.contextmanager
def packed_linear(model: Any) -> Iterator[int]:
    """Within the block, the model's `nn.Linear` layers multiply by packed weights on CPU; yields
    how many modules this block patched (0 when an enclosing block already did, or when this
    torch has no oneDNN)."""
    patched: list[torch.nn.Module] = []
    usable = any(available(dtype) for dtype in PACKED_DTYPES)
    modules = model.modules() if isinstance(model, torch.nn.Module) and usable else ()
    # PEFT is imported by whoever built a LoRA model; without it there are no LoRA layers.
    lora = getattr(sys.modules.get("peft.tuners.lora.layer"), "Linear", None)
    for module in modules:
        if "forward" in vars(module):
            continue
        if type(module) is torch.nn.Linear:
            module.forward = types.MethodType(_packed_forward, module)
        elif lora is not None and type(module) is lora:
            module.forward = types.MethodType(_packed_lora_forward, module)
        else:
            continue
        patched.append(module)
    try:
        yield len(patched)
    finally:
        for module in patched:
            del module.forward
