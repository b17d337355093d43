"""Dr. GRPO's gain over training seeds: the learning benchmark, replicated, and pooled.

One learning run (`bench.bench_learning`) answers for one trained model: whether its held-out
games went up from the warm start's. With one greedy game per scenario and a handful of games
moving, one run's interval is wide, and part of what it measures is the luck of that run's
training seed. This runs the same benchmark once per `--grpo-seeds` seed from one cached warm
start (each replicate's GRPO run and evaluation in OUT/seed_S, resumable like the benchmark's
own stages), then pairs every replicate's held-out games with the warm start's same games and
bootstraps over universes, each drawn with all its replicates' games
(`tomgym.training.rl.learning.pooled_minus`): the method's expected gain from this warm start,
with an interval that covers both the training seed and the held-out game.

Prints one JSON object on its last stdout line (also written to OUT/bench_replicates.json):
`grpo_seeds`; `fooled_rate` and `tom_accuracy` of the warm start, the base model, the scripted
naive liar and the replicates' mean (`grpo`) and each replicate (`grpo_by_seed`);
`grpo_minus_warmstart_fooled` and `grpo_minus_warmstart_tom`, pooled (`n`, `up`, `down` count
replicate-game pairs; `clusters` the universes resampled); `by_seed`: each replicate's own
paired differences, loss reasons, per-step train reward and sampled fooled share, and Dr. GRPO
seconds; `wall_seconds`.

With `--also-splits SPLIT ...` (for example `test`), the warm start and every replicate are also
scored on those splits of the training benchmark, with the same settings and scenario count
(each evaluation resumable: the warm start's in WARMSTART/SPLIT/, a replicate's in
OUT/seed_S/SPLIT/), and reported under `splits`: per split, the same rates and pooled
differences as the main report, and each replicate's own (`by_seed`). A gain measured on the
split the settings were chosen on (the config's `eval_split`, validation) can belong to its
games; the test split says whether it belongs to the method.

With `--soup`, the replicates' adapters are also averaged into one (OUT/soup: the mean of their
weight changes, exact, `tomgym.training.rl.weight_averaging`), scored greedily on the same games
(OUT/soup_eval), and reported under `soup`: its `fooled_rate`, `tom_accuracy`, loss reasons,
`soup_minus_warmstart_fooled` / `_tom` (paired by game) and its policy spec. One model, not a
mean over models: what a user who trains the replicates would ship.

    python -m bench.bench_replicates [--grpo-seeds 0 1 2] [--also-splits test] [--soup]
        [the options of bench.bench_learning]
"""

from __future__ import annotations

import argparse
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
    from tomgym.envs.tomsb.generator import SPLITS
    from tomgym.training.rl.learning import read_scores, stage_folder

    parser = build_parser(__doc__)
    parser.add_argument(
        "--soup",
        action="store_true",
        help="also average the replicates' adapters into one model and score it (report 'soup')",
    )
    parser.add_argument(
        "--grpo-seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="one Dr. GRPO replicate per seed, all from the one warm start",
    )
    parser.add_argument(
        "--also-splits",
        nargs="+",
        default=[],
        metavar="SPLIT",
        help="also score the warm start and every replicate on these splits (report 'splits')",
    )
    args = parser.parse_args(argv)
    if len(set(args.grpo_seeds)) != len(args.grpo_seeds):
        parser.error(f"--grpo-seeds repeat: {args.grpo_seeds}")
    cfg = load_config(args)
    if bad := [s for s in args.also_splits if s not in SPLITS or s == cfg.eval_split]:
        others = [s for s in SPLITS if s != cfg.eval_split]
        parser.error(
            f"--also-splits {bad}: choose among {others} (the benchmark scores {cfg.eval_split})"
        )
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    out = Path(args.out or f"runs/bench_replicates/{args.reward}")
    started = time.perf_counter()
    reports = {seed: learning_report(args, seed, out / f"seed_{seed}") for seed in args.grpo_seeds}
    # The stages' per-game scores, read back from the evaluations the runs just finished.
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
        "eval_universes": first["eval_universes"],
    }
    report.update(pooled_report(before, grpo))
    report["by_seed"] = {
        seed: {key: run.get(key) for key in PER_SEED} for seed, run in reports.items()
    }
    report["policy_specs"] = {seed: run["policy_specs"]["grpo"] for seed, run in reports.items()}
    if args.also_splits:
        report["splits"] = {
            split: split_report(
                args, cfg, out, split, first["policy_specs"]["warmstart"], report["policy_specs"]
            )
            for split in args.also_splits
        }
    if args.soup:
        report["soup"] = soup_report(args, cfg, out, before["warmstart"])
    report["wall_seconds"] = time.perf_counter() - started
    (out / "bench_replicates.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))
    return 0


def pooled_report(
    before: dict[str, dict[str, dict[str, Any]]], grpo: dict[int, dict[str, dict[str, Any]]]
) -> dict[str, Any]:
    """The rates of the stages in `before` (per stage, `score_stage` scores; "warmstart" among
    them) and of the replicates in `grpo` (per seed: their mean as "grpo", and each), and the
    replicates' pooled differences over the warm start."""
    from tomgym.training.rl.learning import PAIRED, pooled_minus, stage_means

    report: dict[str, Any] = {}
    for name, metric in (("fooled_rate", "fooling"), ("tom_accuracy", "tom")):
        rates = {stage: stage_means(scores)[metric] for stage, scores in before.items()}
        by_seed = {seed: stage_means(scores)[metric] for seed, scores in grpo.items()}
        rates["grpo"] = sum(by_seed.values()) / len(by_seed)
        report[name] = {**rates, "grpo_by_seed": by_seed}
    for label in PAIRED:
        report[f"grpo_minus_warmstart_{label}"] = pooled_minus(grpo, before["warmstart"], label)
    return report


def split_report(
    args: argparse.Namespace,
    cfg: Any,
    out: Path,
    split: str,
    warmstart_spec: str,
    grpo_specs: dict[int, str],
) -> dict[str, Any]:
    """Score the warm start (`warmstart_spec`, in WARMSTART/SPLIT/) and each replicate's GRPO
    policy (`grpo_specs` per seed, in OUT/seed_S/SPLIT/) greedily on `split`'s scenarios with the
    benchmark's settings; their `pooled_report`, each replicate's own differences under
    `by_seed`. The specs are the ones the replicates' reports name."""
    from tomgym.training.rl.learning import PAIRED, pooled_minus, score_stage, stage_folder

    def scored(spec: str, folder: Path, stage: str) -> dict[str, dict[str, Any]]:
        return score_stage(
            spec,
            cfg,
            args.eval_games,
            folder / split / stage_folder(stage, cfg, args.eval_episodes),
            episodes=args.eval_episodes,
            split=split,
        )

    warmstart = scored(warmstart_spec, Path(args.warmstart), "warmstart")
    grpo = {seed: scored(spec, out / f"seed_{seed}", "grpo") for seed, spec in grpo_specs.items()}
    report = pooled_report({"warmstart": warmstart}, grpo)
    report["by_seed"] = {
        seed: {
            f"grpo_minus_warmstart_{label}": pooled_minus({seed: scores}, warmstart, label)
            for label in PAIRED
        }
        for seed, scores in grpo.items()
    }
    return report


def soup_report(
    args: argparse.Namespace, cfg: Any, out: Path, warmstart: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Average the replicates' adapters (OUT/soup), score the average greedily on the benchmark's
    games (OUT/soup_eval) and pair it with the warm start's same games."""
    from tomgym.training.eval.loss_reasons import count_reasons
    from tomgym.training.rl.learning import (
        LOSS_REASON,
        PAIRED,
        grpo_minus,
        score_stage,
        stage_folder,
        stage_means,
        stage_spec,
        warm_start,
    )
    from tomgym.training.rl.weight_averaging import average_adapters

    ws_model, _ = warm_start(cfg, Path(args.warmstart))
    adapters = [out / f"seed_{seed}" / "grpo" / "final" for seed in args.grpo_seeds]
    soup = average_adapters(adapters, ws_model, out / "soup")
    spec = stage_spec(ws_model, cfg, adapter=str(soup))
    scores = score_stage(
        spec,
        cfg,
        args.eval_games,
        out / "soup_eval" / stage_folder("grpo", cfg, args.eval_episodes),
        episodes=args.eval_episodes,
    )
    means = stage_means(scores)
    report: dict[str, Any] = {
        "fooled_rate": means["fooling"],
        "tom_accuracy": means["tom"],
        "loss_reasons": count_reasons(scores[LOSS_REASON].values()),
        "policy_spec": spec,
    }
    for label in PAIRED:
        report[f"soup_minus_warmstart_{label}"] = grpo_minus(
            {"grpo": scores, "warmstart": warmstart}, "warmstart", label
        )
    return report


if __name__ == "__main__":
    sys.exit(main())
