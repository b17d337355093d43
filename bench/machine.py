"""The machine a benchmark ran on: every benchmark's JSON carries it as `machine`.

Wall times measured on one CPU say little about another, even at the same core count (README,
"Benchmarks": a 2-core AVX2 machine ran the warm start about 4x slower than the machine the
README's tables come from). Training steps and prefill scale with the CPU's fp32 matrix
throughput, a decode step with its memory bandwidth (it reads every weight and cached key), so
`describe_machine()` measures both, in about a second, beside what the machine says it is:

- `cpu`, `logical_cpus`, `torch`, `cpu_capability` (the widest vector unit torch's kernels use:
  AVX512, AVX2, ...), `gpu` (None without CUDA);
- `fp32_gemm_gflops_1_thread` and `_all_threads`: the median of timed (256 x 576) @ (576 x 1536)
  products, the shape of the bundled SmolLM2-135M's MLP on a 256-token prefill chunk;
- `memory_copy_gb_per_s`: the median bandwidth of copying 256 MiB (bytes read plus written).

Measured while other jobs run, the numbers are lower: that is the point, they record the
conditions the benchmark ran under. `python -m bench.machine` prints them as one JSON line.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GEMM_SHAPE = (256, 576, 1536)
"""(tokens, hidden, MLP width): SmolLM2-135M's up-projection on a 256-token prefill chunk."""
COPY_MIB = 256


def _median_seconds(work: Callable[[], object], repeats: int) -> float:
    work()  # warm-up: first-touch page faults and kernel selection are not the machine's speed
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def gemm_gflops(threads: int, repeats: int = 20) -> float:
    """fp32 GFLOP/s of `GEMM_SHAPE` products on `threads` torch threads (restored afterwards)."""
    import torch

    m, k, n = GEMM_SHAPE
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(m, k, generator=generator)
    right = torch.randn(k, n, generator=generator)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        seconds = _median_seconds(lambda: left @ right, repeats)
    finally:
        torch.set_num_threads(before)
    return 2 * m * k * n / seconds / 1e9


def copy_gb_per_s(mib: int = COPY_MIB, repeats: int = 5) -> float:
    """GB/s of copying `mib` MiB between two preallocated tensors (bytes read plus written)."""
    import torch

    source = torch.ones(mib * 2**20 // 4)
    target = torch.empty_like(source)
    seconds = _median_seconds(lambda: target.copy_(source), repeats)
    return 2 * source.numel() * 4 / seconds / 1e9


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def describe_machine(measure: bool = True) -> dict[str, Any]:
    """What the machine is and, with `measure`, how fast it multiplies and copies (module doc)."""
    import torch

    info: dict[str, Any] = {
        "cpu": _cpu_name(),
        "logical_cpus": os.cpu_count(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    if measure:
        info["fp32_gemm_gflops_1_thread"] = round(gemm_gflops(1), 1)
        info["fp32_gemm_gflops_all_threads"] = round(gemm_gflops(os.cpu_count() or 1), 1)
        info["memory_copy_gb_per_s"] = round(copy_gb_per_s(), 1)
    return info


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    print(json.dumps(describe_machine()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
