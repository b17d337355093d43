"""Inference linear layers on CPU with weights packed once for oneDNN.

`torch.nn.Linear` on CPU hands its weight to the BLAS in its stored (out, in) layout, and the
BLAS re-packs it into cache-sized panels on every call. Inference multiplies the same weights
thousands of times, so `packed_linear(model)` reorders each weight once into oneDNN's blocked
layout (`torch.ops.mkldnn._reorder_linear_weight`, what torch's inductor does for frozen CPU
models) and multiplies with `torch.ops.mkldnn._linear_pointwise`. Measured on a 2-core AMD EPYC
(torch 2.13 CPU, 2 threads, fp32), packed against `F.linear`: the bundled model's 49,152 x 576
output layer 31 -> 11 ms at 32 rows and 11.5 -> 5.9 ms at one, its MLP layers 1.3-1.5x faster
at 1-64 rows and 1.2-1.4x at a 2,048-row prefill (docs/llm.md); `bench/bench_decode_step.py`
and `bench/bench_rollout.py` report what it does to decode steps and whole episodes.

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
- Subclasses of `Linear` (quantised or adapter layers) and modules whose `forward` is already
  replaced on the instance (e.g. accelerate's hooks) are left alone; nested blocks patch nothing
  twice; leaving the block restores exactly the modules it patched.
"""

from __future__ import annotations

import contextlib
import logging
import types
import weakref
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

PACKED_DTYPES = (torch.float32, torch.bfloat16)
"""Input/weight dtypes multiplied through a packed weight (measured faster, or equal, on CPU)."""

# module -> ((address, version, dtype), packed weight)
_packed: weakref.WeakKeyDictionary[torch.nn.Linear, tuple[tuple[int, int, torch.dtype], Any]] = (
    weakref.WeakKeyDictionary()
)
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
    for module in [m for m, (signature, _) in _packed.items() if signature[2] == dtype]:
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


def _packed_weight(module: torch.nn.Linear) -> Any:
    """The module's weight in oneDNN's layout, packed again if the weight changed."""
    signature = _signature(module.weight)
    held = _packed.get(module)
    if held is not None and held[0] == signature:
        return held[1]
    # A normal tensor even inside `inference_mode`, so later no-grad calls may use it too.
    with torch.inference_mode(False), torch.no_grad():
        packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), None)
    _packed[module] = (signature, packed)
    return packed


def _packed_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`nn.Linear.forward` through the packed weight where the contract allows it."""
    weight = self.weight
    if (
        torch.is_grad_enabled()
        or x.device.type != "cpu"
        or weight.device.type != "cpu"
        or x.dtype not in PACKED_DTYPES
        or x.dtype in _failures
        or weight.dtype != x.dtype
        or (self.bias is not None and self.bias.dtype != x.dtype)
    ):
        return F.linear(x, weight, self.bias)
    try:
        return torch.ops.mkldnn._linear_pointwise(
            x, _packed_weight(self), self.bias, "none", [], ""
        )
    except RuntimeError as error:
        # A wrong input raises the same error from F.linear (the caller's to handle) and
        # leaves packing on; only a failure of the packed path itself switches it off.
        result = F.linear(x, weight, self.bias)
        _disable(x.dtype, error)
        return result


def release(model: Any) -> int:
    """Drop the packed weights of `model`'s modules; returns how many were held."""
    modules = model.modules() if isinstance(model, torch.nn.Module) else ()
    return sum(_packed.pop(module, None) is not None for module in modules)


@contextlib.contextmanager
def packed_linear(model: Any) -> Iterator[int]:
    """Within the block, the model's `nn.Linear` layers multiply by packed weights on CPU; yields
    how many modules this block patched (0 when an enclosing block already did, or when this
    torch has no oneDNN)."""
    patched: list[torch.nn.Linear] = []
    usable = any(available(dtype) for dtype in PACKED_DTYPES)
    modules = model.modules() if isinstance(model, torch.nn.Module) and usable else ()
    for module in modules:
        if type(module) is torch.nn.Linear and "forward" not in vars(module):
            module.forward = types.MethodType(_packed_forward, module)
            patched.append(module)
    try:
        yield len(patched)
    finally:
        for module in patched:
            del module.forward
