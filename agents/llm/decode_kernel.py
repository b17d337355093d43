"""A compiled decode-attention kernel for fp32 grouped-query models on CPU, built on first use.

At 32 concurrent games a decode step of the bundled model spent about half its time in the
attention's two batched products (docs/llm.md: 189 of 404 ms on one thread), which torch runs
as 3-row GEMMs at a third of the memory bandwidth. `decode_attention.cpp` reads each KV head's
keys and values once for its group of query heads (fused scores, softmax and weighted sum,
parallel over batch rows x KV heads on torch's intra-op threads): 9.1 -> 3.4 ms a layer on one
thread and 4.8 -> 1.75 ms on two (32 games, 1,300 cached tokens; reading the keys and values
once takes 3.0 and 2.3 ms). Whole decode steps: `bench/bench_decode_step.py`; episodes:
`bench/bench_rollout.py`.

Contract:

- `decode_attention(query, key, value, keep, scale)`: query (B, H, 1, D), key/value (B, KV, L,
  D) fp32 on CPU with unit stride in D (read in place, strided buffers included), keep a bool
  mask (B|1, 1, 1, L) (True = attend: transformers' `sdpa` mask) or None (`supports` checks);
  returns (B, 1, H, D), equal to torch's products in `attention._grouped_decode` up to float
  rounding (`tests/agents/test_decode_kernel.py`). Masked positions are never read; a row
  whose keys are all masked returns zeros (torch: NaN).
- `kernel()` builds the extension once per process with torch's C++ extension loader (a C++
  compiler, the Python headers and ninja: the `llm` extra installs ninja), `-O3 -march=native
  -ffast-math -fopenmp`, cached under torch's extensions folder by a name that hashes the
  source, the torch version and this CPU's flags (a cache shared between machines never loads
  a build for another CPU). The first build takes 20-40 s; later processes load it. A build
  lock left by a process killed mid-build (torch's loader would wait on it forever) is removed
  once it is `STALE_LOCK_SECONDS` old.
- Where the build or load fails (no compiler, no ninja, macOS without OpenMP) `kernel()`
  returns None after one warning naming the cause, and the callers keep torch's products:
  nothing changes but speed. `TOMGYM_DECODE_KERNEL=0` turns the kernel off without trying
  (to compare the two paths, or to skip the one-time build).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

ENV_SWITCH = "TOMGYM_DECODE_KERNEL"
"""Environment variable: "0" (or "false", "off") keeps torch's products and builds nothing."""

SOURCE = Path(__file__).with_name("decode_attention.cpp")

_lock = threading.Lock()
_state: dict[str, Any] = {}


def enabled() -> bool:
    """False where `TOMGYM_DECODE_KERNEL` turns the kernel off."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "off", "no"}


def _cpu_signature() -> str:
    """This CPU's instruction-set flags (Linux) or its machine name: part of the build's name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def build_name() -> str:
    """The extension's name: source, torch version and CPU flags hashed into it."""
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), torch.__version__.encode(), _cpu_signature().encode()):
        digest.update(part)
    return f"tomgym_decode_attention_{digest.hexdigest()[:16]}"


def _tool_dirs() -> list[str]:
    """Where the `ninja` that `pip install ninja` put may be: torch's loader runs `ninja` from
    PATH, which does not name the virtual environment's bin folder unless it is activated."""
    dirs = [str(Path(sys.executable).parent)]
    with contextlib.suppress(ImportError, AttributeError):
        import ninja

        dirs.insert(0, str(ninja.BIN_DIR))
    return dirs


STALE_LOCK_SECONDS = 600
"""A build lock older than this was left by a process that died while building (a build takes
20-40 s): torch's loader would wait on it forever, so `_build` removes it."""


def clear_stale_lock(build_dir: Path, max_age: float = STALE_LOCK_SECONDS) -> bool:
    """Remove `build_dir/lock` when it is older than `max_age` seconds; True if removed."""
    lock = build_dir / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return False
    if age <= max_age:
        return False
    logger.warning("removing a stale build lock %s (%.0f s old)", lock, age)
    with contextlib.suppress(OSError):
        lock.unlink()
    return True


def _build() -> Any:
    from torch.utils.cpp_extension import load

    name = build_name()
    with contextlib.suppress(ImportError, AttributeError, OSError):
        from torch.utils.cpp_extension import _get_build_directory

        clear_stale_lock(Path(_get_build_directory(name, verbose=False)))
    flags = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([*_tool_dirs(), path])
    try:
        return load(
            name=name,
            sources=[str(SOURCE)],
            extra_cflags=flags,
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
    finally:
        os.environ["PATH"] = path


def kernel() -> Any | None:
    """The built extension module, or None (switched off, or the build failed: warned once)."""
    if not enabled():
        return None
    if "module" in _state:
        return _state["module"]
    with _lock:
        if "module" not in _state:
            try:
                _state["module"] = _build()
            except Exception as exc:  # noqa: BLE001 - any build failure means "use torch's path"
                _state["module"] = None
                # A compiler's error is many lines; the last one names the cause.
                cause = (str(exc).strip().splitlines() or [""])[-1][:300]
                logger.warning(
                    "decode-attention kernel unavailable (%s: %s); decoding with torch's "
                    "batched products (same results, slower on CPU). Set %s=0 to skip the build.",
                    type(exc).__name__,
                    cause,
                    ENV_SWITCH,
                )
        return _state["module"]


def built() -> bool:
    """Whether this process has the kernel loaded: it is built on the first decode step that
    `supports` takes, so False after a run that never decoded fp32 on CPU (or failed to build)."""
    return _state.get("module") is not None


def supports(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: Any) -> bool:
    """Whether `decode_attention` takes these inputs (else the caller uses torch's products)."""
    return (
        query.device.type == "cpu"
        and query.dtype == key.dtype == value.dtype == torch.float32
        and query.shape[2] == 1
        and key.stride(-1) == 1
        and value.stride(-1) == 1
        and (mask is None or _row_mask(mask, key.shape[0], key.shape[2]))
    )


def _row_mask(mask: Any, batch: int, length: int) -> bool:
    """A bool mask of one row per batch row (or one for all), shaped (B|1, 1, 1, L)."""
    return (
        isinstance(mask, torch.Tensor)
        and mask.dtype == torch.bool
        and mask.dim() == 4
        and mask.shape[0] in (1, batch)
        and mask.shape[1] == mask.shape[2] == 1
        and mask.shape[3] == length
    )


def decode_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    keep: torch.Tensor | None,
    scale: float,
    module: Any,
) -> torch.Tensor:
    """Attention of one query token per row through `module` (from `kernel()`), for inputs
    that `supports` takes (`keep` shaped (B|1, 1, 1, L)); shapes in the module docstring."""
    batch, heads, _, dim = query.shape
    length = key.shape[2]
    if keep is None:
        flat_keep = torch.empty(0, dtype=torch.bool)
    else:
        flat_keep = keep.reshape(keep.shape[0], keep.shape[-1]).expand(batch, length)
        if flat_keep.stride(1) != 1:
            flat_keep = flat_keep.contiguous()
    return module.decode_attention(
        query.reshape(batch, heads, dim), key, value, flat_keep, float(scale)
    )
