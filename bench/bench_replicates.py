"""Dr. GRPO's gain over training seeds: the learning benchmark, replicated, and pooled.

One learning run (`bench.bench_learning`) answers for one trained model: whether its held-out
games went up from the warm start's. With one greedy game per scenario and a handful of games
moving, one run's interval is wide, and part of what it measures is the luck of that run's
training seed. This runs the same benchmark once per `--grpo-seeds` seed from one cached warm
start (each replicate's GRPO run and evaluation in OUT/seed_S, resumable like the benchmark's
own stages), then pairs every replicate's held-out games with the warm start's same games and
bootstraps over scenarios, each scenario drawn with all its replicates' games
(`tomgym.training.rl.learning.pooled_minus`): the method's expected gain from this warm start,
with an interval that covers both the training seed and the held-out game.

Prints one JSON object on its last stdout line (also written to OUT/bench_replicates.json):
`grpo_seeds`; `fooled_rate` and `tom_accuracy` of the warm start, the base model, the scripted
naive liar and the replicates' mean (`grpo`) and each replicate (`grpo_by_seed`);
`grpo_minus_warmstart_fooled` and `grpo_minus_warmstart_tom`, pooled (`n`, `up`, `down` count
replicate-game pairs; `clusters` the scenarios resampled); `by_seed`: each replicate's own
paired differences, loss reasons, per-step train reward and sampled fooled share, and Dr. GRPO
seconds; `wall_seconds`.

    python -m bench.bench_replicates [--grpo-seeds 0 1 2] [the options of bench.bench_learning]
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_learning import build_parser, learning_report, load_config

PER_SEED = (
    "grpo_minus_warmstart_fooled",
    "grpo_minus_warmstart_tom",
    "loss_reasons",
    "train_reward_by_step",
    "train_fooled_by_step",
    "frac_zero_variance_groups",
    "grpo_seconds",
)
"""Each replicate's own numbers the pooled report keeps (its full report is OUT/seed_S)."""


def main(argv: list[str] | None = None) -> int:
    from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
    from tomgym.training.rl.learning import (
        PAIRED,
        pooled_minus,
        read_scores,
        stage_folder,
        stage_means,
    )

    parser = build_parser(__doc__)
    parser.add_argument(
        "--grpo-seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="one Dr. GRPO replicate per seed, all from the one warm start",
    )
    args = parser.parse_args(argv)
    if len(set(args.grpo_seeds)) != len(args.grpo_seeds):
        parser.error(f"--grpo-seeds repeat: {args.grpo_seeds}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    out = Path(args.out or f"runs/bench_replicates/{args.reward}")
    started = time.perf_counter()
    reports = {seed: learning_report(args, seed, out / f"seed_{seed}") for seed in args.grpo_seeds}
    # The stages' per-game scores, read back from the evaluations the runs just finished.
    cfg = load_config(args)
    before = {
        stage: read_scores(Path(args.warmstart) / stage_folder(stage, cfg, args.eval_episodes))
        for stage in ("warmstart", "base", "naive_liar")
    }
    grpo = {
        seed: read_scores(out / f"seed_{seed}" / stage_folder("grpo", cfg, args.eval_episodes))
        for seed in args.grpo_seeds
    }
    first = reports[args.grpo_seeds[0]]
    report: dict[str, Any] = {
        "machine": first["machine"],
        "reward": args.reward,
        "grpo_seeds": list(args.grpo_seeds),
        **{flag: getattr(cfg, flag) for flag in CONSTRAINT_FLAGS},
        "eval_games": first["eval_games"],
        "eval_scenarios": first["eval_scenarios"],
    }
    for name, metric in (("fooled_rate", "fooling"), ("tom_accuracy", "tom")):
        rates = {stage: stage_means(scores)[metric] for stage, scores in before.items()}
        by_seed = {seed: stage_means(scores)[metric] for seed, scores in grpo.items()}
        rates["grpo"] = sum(by_seed.values()) / len(by_seed)
        report[name] = {**rates, "grpo_by_seed": by_seed}
    for label in PAIRED:
        report[f"grpo_minus_warmstart_{label}"] = pooled_minus(grpo, before["warmstart"], label)
    report["by_seed"] = {
        seed: {key: run.get(key) for key in PER_SEED} for seed, run in reports.items()
    }
    report["policy_specs"] = {seed: run["policy_specs"]["grpo"] for seed, run in reports.items()}
    report["wall_seconds"] = time.perf_counter() - started
    (out / "bench_replicates.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
