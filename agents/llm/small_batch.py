"""Linear layers for the few rows of a decode step on CPU: `weight @ x.T` instead of `x @ weight.T`.

`torch.nn.Linear` computes `x @ weight.T`. A CPU BLAS packs the right-hand operand of a matrix
product into cache-sized panels before it multiplies, so with `x` on the left it re-packs the
whole weight on every call; with a prefill's hundreds of rows that cost is spread over them, but
a decode step of a few games has 2-64 rows and pays it in full. Written as `weight @ x.T` the
weight is the streamed left operand and only the few rows are packed. Measured on a 2-core AMD
EPYC (torch 2.13 CPU, 2 threads), `weight @ x.T` against `F.linear`: 2.4-3.5x faster for the
model's 49,152 x 576 output layer at 2-16 rows, 1.5-2.5x for its 1,536 x 576 and 576 x 1,536
MLP layers, about equal from 96 rows up and at one row (where BLAS uses a matrix-vector product);
`bench/bench_rollout.py` reports what it does to whole episodes (`small_batch_linear`).

Contract of `small_batch_linear(model)` (a `with` block, used by `kv_cache.CachedGenerator`
around generation):
- Within the block, every module of exact type `torch.nn.Linear` whose input has
  `SMALL_BATCH_ROWS` rows (all leading dimensions together) on CPU, with gradients disabled,
  returns `(weight @ x.T).T` plus its bias; any other call (one row, a prefill, GPU, training)
  is `F.linear`, call for call. Results equal `F.linear`'s up to float rounding (the sum runs in
  another order): `tests/agents/test_small_batch.py`.
- Subclasses of `Linear` and modules whose `forward` is already replaced on the instance (e.g.
  accelerate's hooks) are left alone; nested blocks patch nothing twice; leaving the block
  restores exactly the modules it patched. Nothing is serialised with the model.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

SMALL_BATCH_ROWS = range(2, 65)
"""Input rows (a decode step's games) for which `weight @ x.T` was measured faster on CPU."""


def _small_batch_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`nn.Linear.forward`, as `(weight @ x.T).T` for a CPU decode step's few rows."""
    features = x.shape[-1]
    rows = x.numel() // features if features else 0
    if rows not in SMALL_BATCH_ROWS or x.device.type != "cpu" or torch.is_grad_enabled():
        return F.linear(x, self.weight, self.bias)
    flat = x.reshape(rows, features)
    if self.bias is None:
        out = torch.mm(self.weight, flat.t())
    else:
        out = torch.addmm(self.bias.unsqueeze(1), self.weight, flat.t())
    # Callers `.view()` the projections: hand back contiguous rows, as F.linear does.
    return out.t().contiguous().reshape(*x.shape[:-1], self.out_features)


@contextlib.contextmanager
def small_batch_linear(model: Any) -> Iterator[int]:
    """Within the block, the model's `nn.Linear` layers take the small-batch path; yields how
    many modules this block patched (0 when an enclosing block already did)."""
    patched: list[torch.nn.Linear] = []
    modules = model.modules() if isinstance(model, torch.nn.Module) else ()
    for module in modules:
        if type(module) is torch.nn.Linear and "forward" not in vars(module):
            module.forward = types.MethodType(_small_batch_forward, module)
            patched.append(module)
    try:
        yield len(patched)
    finally:
        for module in patched:
            del module.forward
