"""Does the trainer learn? A CPU benchmark with the bundled SmolLM2-135M-Instruct (<= 30 min).

Stages, each evaluated on the same held-out validation games (greedy, paired by game):
  0. the base model;
  1. after a short SFT warm start on the scripted ToM-heuristic defender's transcripts (LoRA,
     merged) -- reported separately;
  2. after a few Dr. GRPO steps on top (learnable shaping: additive format + fooling).
Prints one JSON object: per-stage mean reward and components, and for each stage pair the mean
paired difference with a 95% paired-bootstrap CI and a t-interval.

    python -m bench.bench_learning [--steps 3] [--eval-games 16] [--sft-steps 12] [--out runs/bench_learning]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def paired_difference(after: list[float | None], before: list[float | None], seed: int = 0) -> dict:
    """Mean of after - before over games scored in both, with bootstrap and t 95% intervals."""
    from scipy import stats

    pairs = [(a, b) for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    diffs = np.array([a - b for a, b in pairs], dtype=float)
    out: dict[str, Any] = {
        "n": len(diffs),
        "mean_difference": float(diffs.mean()) if len(diffs) else math.nan,
    }
    if len(diffs) < 2:
        return out
    rng = np.random.default_rng(seed)
    boots = diffs[rng.integers(0, len(diffs), size=(10_000, len(diffs)))].mean(axis=1)
    out["bootstrap_ci95"] = [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]
    sem = diffs.std(ddof=1) / math.sqrt(len(diffs))
    if sem > 0:
        half = float(stats.t.ppf(0.975, len(diffs) - 1) * sem)
        out["t_ci95"] = [out["mean_difference"] - half, out["mean_difference"] + half]
    else:
        out["t_ci95"] = [out["mean_difference"], out["mean_difference"]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=3, help="Dr. GRPO steps")
    parser.add_argument("--eval-games", type=int, default=16, help="held-out games per stage")
    parser.add_argument("--sft-steps", type=int, default=12)
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="rollout sampling temperature (1.0 rarely gives a well-formed answer at this size)",
    )
    parser.add_argument("--sft-games", type=int, default=16)
    parser.add_argument("--no-sft", action="store_true", help="skip the warm start")
    parser.add_argument("--out", default="runs/bench_learning")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(args.seed)
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import (
        TrainingSession,
        build_trainer,
        eval_rows,
        evaluate,
        load_model,
        sft_warmstart,
    )

    cfg = TrainConfig.from_dict(
        {
            "model": "default",
            "output_dir": args.out,
            "env_config": {"max_attacker_turns": 2, "max_retries": 0},
            "prior_levels": [1],
            "attackers": ["base"],
            "max_scenarios": 16,
            "eval_attackers": ["base"],
            "eval_games_per_variant": args.eval_games,
            "eval_temperature": 0.0,
            "reward_weights": {"fooling": 1.0, "format": 0.5},
            "reward_gate": None,
            "num_generations": 4,
            "per_device_train_batch_size": 4,
            "max_completion_length": 192,
            "max_turn_tokens": 96,
            "learning_rate": 5e-5,
            "max_steps": args.steps,
            "temperature": args.temperature,
            "save_steps": 10_000,
            "eval_steps": 0,
            "sft_teacher": "tom_heuristic",
            "sft_games": args.sft_games,
            "sft_steps": args.sft_steps,
            "sft_batch_size": 4,
            "seed": args.seed,
            "best_metric": "reward",
        }
    )
    out_dir = Path(cfg.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    session = TrainingSession(cfg)
    rows = eval_rows(cfg)
    report: dict[str, Any] = {
        "model": "smollm2-135m-instruct",
        "eval_games": len(rows),
        "stages": {},
    }
    rewards: dict[str, list[float | None]] = {}

    def stage(name: str, model: Any) -> None:
        started = time.perf_counter()
        result = evaluate(session, model, rows=rows, tag=f"bench-{name}")
        rewards[name] = result["rewards"]
        report["stages"][name] = {**result["mean"], "eval_seconds": time.perf_counter() - started}
        print(f"[bench] {name}: {json.dumps(report['stages'][name])}", file=sys.stderr, flush=True)

    model = load_model(cfg, session.model_path)
    stage("base", model)
    if not args.no_sft:
        model, sft_report = sft_warmstart(session, model, out_dir)
        report["sft_warmstart"] = sft_report
        stage("sft", model)
    started = time.perf_counter()
    trainer = build_trainer(session, model)
    trainer.remove_callback(
        next(c for c in trainer.callback_handler.callbacks if hasattr(c, "history"))
    )
    result = trainer.train()
    seconds = time.perf_counter() - started
    steps = [h for h in trainer.state.log_history if "step_time" in h or "time/rollout_s" in h]
    report["grpo"] = {
        "steps": cfg.max_steps,
        "seconds": seconds,
        "seconds_per_step": seconds / cfg.max_steps,
        "train_reward_by_step": [h.get("reward") for h in steps],
        "rollout_s_by_step": [h.get("time/rollout_s") for h in steps],
        "optimisation_s_by_step": [h.get("time/optimisation_s") for h in steps],
        "sampled_tokens_per_episode": [h.get("rollout/sampled_tokens_per_episode") for h in steps],
        **{k: v for k, v in result.metrics.items()},
    }
    trainer.model.eval()
    stage("grpo", trainer.model)
    first = "sft" if "sft" in rewards else "base"
    report["difference"] = {
        "grpo_minus_base": paired_difference(rewards["grpo"], rewards["base"]),
        "grpo_minus_" + first: paired_difference(rewards["grpo"], rewards[first]),
    }
    if "sft" in rewards:
        report["difference"]["sft_minus_base"] = paired_difference(rewards["sft"], rewards["base"])
    report["held_out_mean_reward"] = {
        k: float(np.mean([r for r in v if r is not None])) for k, v in rewards.items()
    }
    (out_dir / "bench_learning.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
