"""Training precision on this machine: seconds per SFT warm-start step in fp32 and in bf16 mixed
precision (`bf16=true`), measured in one run.

    python -m bench.bench_precision [--pairs 2] [--steps 2] [--tokens 948] [--loss-tokens 349]

Each measurement is a real warm-start stage (`trainer.sft_on_sequences`, the stage the warm start
runs: LoRA from `cpu_demo.yaml`, `sft_batch_size` sequences a step) on a fresh copy of the model,
for `--steps` steps, timed by the trainer's own train loop (loading is not counted), on
sequences of random ids shaped like the demo's teacher games (948 tokens, 349 of them under the
loss, as its warm start reports them in `sft_warmstart.json`): the content does not change the
arithmetic. The two precisions alternate in pairs (`bench.paired`). A Dr. GRPO step's
optimisation runs the same forward and backward passes; its rollouts are fp32 on CPU in either
setting (`trl_adapter.cpu_generation_without_autocast`).

Prints one JSON object on the last line of stdout: `machine`, `config`, `seconds_per_step` (per
precision, one reading a stage), `median_seconds_per_step`, `fp32_vs_bf16` (the ratio of the
medians: bf16's speed-up) and `pair_ratios`; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

PRECISIONS = {"fp32": False, "bf16": True}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench_precision", description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="fp32/bf16 pairs, order alternating")
    parser.add_argument("--steps", type=int, default=2, help="SFT steps per measurement")
    parser.add_argument("--tokens", type=int, default=948, help="tokens per sequence")
    parser.add_argument("--loss-tokens", type=int, default=349, help="of which under the loss")
    parser.add_argument("--config", default=None, help="default: training/configs/cpu_demo.yaml")
    parser.add_argument("--num-threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)
    if min(args.pairs, args.steps) < 1 or not 0 < args.loss_tokens < args.tokens:
        parser.error("--pairs and --steps must be >= 1 and 0 < --loss-tokens < --tokens")
    return args


def random_sequences(count: int, tokens: int, loss_tokens: int, vocab: int, seed: int) -> list:
    """`count` episodes of random ids: `tokens - loss_tokens` prompt ids, then `loss_tokens`
    ids under the loss."""
    from tomgym.training.rl.tokens import EpisodeTokens

    rng = random.Random(seed)
    episodes = []
    for i in range(count):
        ids = [rng.randrange(vocab) for _ in range(tokens)]
        prompt, completion = ids[: tokens - loss_tokens], ids[tokens - loss_tokens :]
        episodes.append(
            EpisodeTokens(
                game_id=f"random-{i}",
                prompt_ids=prompt,
                completion_ids=completion,
                env_mask=[1] * len(completion),
            )
        )
    return episodes


def measure(cfg: Any, tokenizer: Any, episodes: list) -> float:
    """Seconds per step of the warm start's SFT stage on a fresh model, as `cfg` sets it (its
    `bf16` and `sft_steps`): the trainer's own train-loop runtime, loading not counted."""
    from tomgym.training.rl.trainer import load_model, resolve_model_path, sft_on_sequences

    model = load_model(cfg, resolve_model_path(cfg.model))
    with tempfile.TemporaryDirectory() as out:
        _, metrics = sft_on_sequences(cfg, model, tokenizer, episodes, Path(out))
    return float(metrics["train_runtime"]) / cfg.sft_steps


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import load_tokenizer, resolve_model_path

    from bench import paired
    from bench.machine import describe_machine

    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    machine = describe_machine()
    path = args.config or str(resources.files("tomgym.training") / "configs" / "cpu_demo.yaml")
    cfg = TrainConfig.load(path, [])
    tokenizer = load_tokenizer(cfg, resolve_model_path(cfg.model))
    episodes = random_sequences(
        cfg.sft_batch_size * args.steps, args.tokens, args.loss_tokens, len(tokenizer), cfg.seed
    )
    seconds: dict[str, list[float]] = {name: [] for name in PRECISIONS}
    for pair, name in paired.interleaved(list(PRECISIONS), args.pairs):
        stage = cfg.model_copy(update={"bf16": PRECISIONS[name], "sft_steps": args.steps})
        seconds[name].append(measure(stage, tokenizer, episodes))
        print(f"pair {pair + 1} {name}: {seconds[name][-1]:.2f} s a step", file=sys.stderr)
    compared = paired.summary(seconds, "fp32", "bf16")
    result = {
        "machine": machine,
        "config": {
            "config": path,
            "model": cfg.model,
            "lora_r": cfg.lora_r,
            "sequences_per_step": cfg.sft_batch_size,
            "tokens": args.tokens,
            "loss_tokens": args.loss_tokens,
            "steps": args.steps,
            "pairs": args.pairs,
            "torch_threads": torch.get_num_threads(),
        },
        "seconds_per_step": seconds,
        "median_seconds_per_step": compared.pop("median"),
        **compared,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
