"""Decode-step benchmark: the compiled decode-attention kernel or packed linear weights, on or off.

One decode step of the bundled model (fp32, or `--model SPEC`) over a batch cache as the
rollout engine builds it (`kv_cache._GrowingLayer` views of buffers with spare room, left
padding of different widths per row, the engine's `grouped_attention` and packed linear
layers), holding the model's own encoding of seeded random token ids. `--compare` picks the
two settings (both otherwise as the engine runs):

- `attention` (default): `kernel`, the compiled decode attention (`agents.llm.decode_kernel`),
  against `torch`, the kernel switched off (`TOMGYM_DECODE_KERNEL=0`);
- `linear`: `packed`, linear weights packed once for oneDNN (`agents.llm.packed_linear`),
  against `f_linear`, torch's `F.linear`.

At each `--games` level, in `--pairs` interleaved pairs (`bench.paired`: AB, BA, ...), `--steps`
consecutive decode steps with each setting from the same cache; reported per level: the median
milliseconds a step of each, `<first>_vs_<second>` (the second's median over the first's: the
first's speed-up), each pair's ratio, and the largest difference between the two settings'
logits over the first step's rows, with whether their greedy tokens agree.

Progress goes to stderr; the last line of stdout is one JSON object:

    {"machine": {...}, "config": {...}, "levels": [{"games", "cached_tokens", "median_ms":
      {"kernel", "torch"}, "kernel_vs_torch", "pair_ratios", "max_abs_logit_diff",
      "same_greedy_tokens"}]}

    python -m bench.bench_decode_step [--compare attention|linear] [--games 1,8,32]
        [--cached-tokens 1300] [--steps 8] [--pairs 3] [--num-threads 1] [--model default]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from bench import paired

# --compare -> its two settings, each as (decode kernel on, packed linear weights on).
SETTINGS = {
    "attention": {"kernel": (True, True), "torch": (False, True)},
    "linear": {"packed": (True, True), "f_linear": (True, False)},
}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prefilled(model: Any, cached: int) -> list[tuple[Any, Any]]:
    """Each layer's keys and values (kv_heads, cached, head_dim) for `cached` seeded random
    token ids, encoded by the model: the values a real cache holds have the model's scale,
    which random tensors would not (their softmax is nearly one-hot, and tiny rounding
    differences then move the logits)."""
    import torch
    from tomgym.agents.llm.kv_cache import cache_kwarg
    from transformers import DynamicCache

    generator = torch.Generator().manual_seed(cached)
    ids = torch.randint(100, model.config.vocab_size - 100, (1, cached), generator=generator)
    cache = DynamicCache()  # filled in place, under the keyword this transformers takes
    with torch.inference_mode():
        model(input_ids=ids, use_cache=True, **{cache_kwarg(model): cache})
    return [(layer.keys[0], layer.values[0]) for layer in cache.layers]


def _batch_cache(
    prefilled: list[tuple[Any, Any]], games: int, cached: int, spare: int
) -> tuple[list[Any], Any]:
    """Per-layer buffers (games, kv_heads, cached + spare, head_dim) with row r holding the
    first `cached - pad_r` prefilled positions right-aligned after `pad_r = 37 r mod (cached //
    4)` positions of left padding (zeros), as the engine lays out games of different lengths;
    and the (games, cached) mask of those holes."""
    import torch

    pads = [(37 * row) % max(1, cached // 4) for row in range(games)]
    buffers = []
    for keys, values in prefilled:
        heads, _, dim = keys.shape
        pair = []
        for source in (keys, values):
            buffer = torch.zeros(games, heads, cached + spare, dim)
            for row, pad in enumerate(pads):
                buffer[row, :, pad:cached] = source[:, : cached - pad]
            pair.append(buffer)
        buffers.append(tuple(pair))
    mask = torch.ones(games, cached, dtype=torch.long)
    for row, pad in enumerate(pads):
        mask[row, :pad] = 0
    return buffers, mask


def _decode(
    model: Any, buffers: list[Any], mask: Any, cached: int, steps: int, packed: bool = True
) -> tuple[list[float], Any]:
    """`steps` decode steps from a cache of `cached` positions (linear weights packed or not);
    seconds per step and the first step's logits."""
    import contextlib

    import torch
    from tomgym.agents.llm.attention import grouped_attention
    from tomgym.agents.llm.kv_cache import _GrowingLayer, cache_kwarg
    from tomgym.agents.llm.packed_linear import packed_linear
    from transformers import DynamicCache

    games = mask.shape[0]
    cache = DynamicCache()
    cache.layers = [_GrowingLayer(k, v, cached) for k, v in buffers]
    positions = mask.sum(dim=1, keepdim=True)
    tokens = torch.full((games, 1), 42, dtype=torch.long)
    seconds, first = [], None
    linear = packed_linear(model) if packed else contextlib.nullcontext()
    with torch.inference_mode(), grouped_attention(model), linear:
        for _ in range(steps):
            mask = torch.cat([mask, torch.ones(games, 1, dtype=torch.long)], dim=1)
            started = time.perf_counter()
            out = model(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{cache_kwarg(model): cache},
            )
            seconds.append(time.perf_counter() - started)
            first = out.logits[:, -1].clone() if first is None else first
            positions = positions + 1
    return seconds, first


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--compare", choices=sorted(SETTINGS), default="attention", help="what to switch"
    )
    parser.add_argument("--games", default="1,8,32", help="batch sizes (concurrent games)")
    parser.add_argument("--cached-tokens", type=int, default=1300)
    parser.add_argument("--steps", type=int, default=8, help="decode steps a timed run")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--num-threads", type=int, default=1)
    parser.add_argument("--model", default="default")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.pairs < 1 or args.cached_tokens < 1:
        parser.error("--steps, --pairs and --cached-tokens must be positive")

    import torch
    from tomgym.agents.llm import decode_kernel
    from tomgym.agents.llm.backends.hf import load_hf_model

    from bench.machine import describe_machine

    torch.set_num_threads(args.num_threads)
    machine = describe_machine()
    if decode_kernel.kernel() is None:
        raise SystemExit("the decode-attention kernel did not build here (see the warning)")
    model, _ = load_hf_model(args.model, device="cpu", dtype="float32")
    model.eval()
    prefilled = _prefilled(model, args.cached_tokens)
    levels = []
    settings = SETTINGS[args.compare]
    fast, slow = settings
    switch_before = os.environ.get(decode_kernel.ENV_SWITCH)
    for games in [int(g) for g in args.games.split(",") if g.strip()]:
        buffers, mask = _batch_cache(prefilled, games, args.cached_tokens, spare=args.steps)
        runs: dict[str, list[float]] = {name: [] for name in settings}
        logits: dict[str, Any] = {}
        for pair, name in paired.interleaved(list(settings), args.pairs):
            kernel_on, packed = settings[name]
            os.environ[decode_kernel.ENV_SWITCH] = "1" if kernel_on else "0"
            seconds, first = _decode(
                model, buffers, mask, args.cached_tokens, args.steps, packed=packed
            )
            runs[name].append(statistics.median(seconds) * 1000)
            logits.setdefault(name, first)
            _log(f"{games} games, pair {pair}: {name} {runs[name][-1]:.1f} ms a step")
        if switch_before is None:
            os.environ.pop(decode_kernel.ENV_SWITCH, None)
        else:
            os.environ[decode_kernel.ENV_SWITCH] = switch_before
        summary = paired.summary(runs, slow, fast)
        levels.append(
            {
                "games": games,
                "cached_tokens": args.cached_tokens,
                "median_ms": {k: round(v, 2) for k, v in summary["median"].items()},
                f"{fast}_vs_{slow}": summary[f"{slow}_vs_{fast}"],
                "pair_ratios": summary["pair_ratios"],
                "max_abs_logit_diff": float((logits[fast] - logits[slow]).abs().max()),
                "same_greedy_tokens": bool(
                    torch.equal(logits[fast].argmax(-1), logits[slow].argmax(-1))
                ),
            }
        )
    report = {
        "machine": machine,
        "config": {
            "model": args.model,
            "compare": args.compare,
            "steps": args.steps,
            "pairs": args.pairs,
            "torch_threads": torch.get_num_threads(),
            "kernel_build": decode_kernel.build_name(),
        },
        "levels": levels,
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
