"""Dr. GRPO's gain on a larger held-out pool: every scenario of a benchmark seed not trained on.

The learning benchmark (`bench.bench_learning`) scores its stages on the 20 validation scenarios
of the training benchmark at the config's prior level: all the held-out scenarios it has. A
gain that lives in a few of them cannot give an interval over 20 scenarios that leaves zero,
however often it repeats. The generator (`envs.tomsb.generator`) draws as many fresh universes
as asked: the benchmark of another seed is 100 universes from the same word banks, none of them
(and none of their true paths; `overlap` in the report counts both) in the training pool. This
scores a warm start and its Dr. GRPO policy (and the scripted naive liar, as reference) on every
scenario of benchmark `--benchmark-seed` at the config's prior levels, over all three of its
splits, with the benchmark's evaluation settings (greedy, the config's turn budget, answer
constraints, attackers and env settings, one game per scenario), and pairs them by game.

The policies are a finished learning run's (`--run RUN`: its bench_learning.json
`policy_specs`) or given as specs (`--warmstart-spec`, `--grpo-spec`: a checkpoint of a run, a
model of your own). Each evaluation lives in OUT/<split>/<stage folder>, is resumed if it was
interrupted and read, not replayed, when finished with the same settings (a folder holding other
settings is refused), so a long pool can be scored over several sittings.

Prints one JSON object on its last stdout line (also written to OUT/bench_heldout.json): `pool`
(benchmark seed, splits, prior levels, scenarios, games, and `overlap` with the training pool),
`policy_specs`; `fooled_rate`, `tom_accuracy`, `format_ok_rate` per stage;
`grpo_minus_warmstart_fooled` and `grpo_minus_warmstart_tom` (paired by game, bootstrap over
scenarios, with the games that went `up` and `down`); `loss_reasons` per stage; `by_split`: the
same rates and differences per split; `eval_seconds` per stage and split (near zero for an
evaluation read back); `wall_seconds`.

Several pools, one reading (`--pool OUT1 OUT2 ...`): the finished outputs of runs on different
benchmark seeds with the same policies and settings, read back (nothing is played; a folder
without its bench_heldout.json, two of one seed, other policies or settings are refused) and
paired as one pool, each game and scenario kept apart by its seed. Prints the same keys over
all of them, with `pool.benchmark_seeds` and `by_seed` (each pool's rates and differences) in
place of `by_split` (also written to OUT/bench_heldout_pooled.json with `--out`).

    python -m bench.bench_heldout (--run RUN | --warmstart-spec SPEC --grpo-spec SPEC)
        [--benchmark-seed 1] [--splits train validation test] [--out runs/bench_heldout/seed1]
        [--concurrency 32] [--config CONFIG.yaml] [key=value ...]
    python -m bench.bench_heldout --pool OUT [OUT ...] [--out DIR] [--config CONFIG.yaml]
        [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_learning import load_config

POOLED_REPORT = "bench_heldout_pooled.json"
"""Where `--pool --out DIR` writes its report (not bench_heldout.json: it is no one seed's)."""
STAGES = ("naive_liar", "warmstart", "grpo")
"""Scored in this order: the reference first (seconds), then the two models paired."""


def build_parser() -> argparse.ArgumentParser:
    from tomgym.envs.tomsb.generator import SPLITS

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", default=None, help="a learning run: its policy_specs are used")
    parser.add_argument("--warmstart-spec", default=None, help="the policy before Dr. GRPO")
    parser.add_argument("--grpo-spec", default=None, help="the policy after Dr. GRPO")
    parser.add_argument("--benchmark-seed", type=int, default=1)
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument("--out", default=None, help="default: runs/bench_heldout/seed<S>")
    parser.add_argument("--concurrency", type=int, default=32, help="games played at once")
    parser.add_argument("--config", default=None, help="default: training/configs/cpu_demo.yaml")
    parser.add_argument(
        "--pool",
        nargs="+",
        default=None,
        metavar="OUT",
        help="read finished outputs of other benchmark seeds and pair them as one pool",
    )
    parser.add_argument("overrides", nargs="*", help="key=value config overrides (as tomgym train)")
    return parser


def policy_specs(args: argparse.Namespace) -> dict[str, str]:
    """The stages' specs: the learning run's, replaced by any given on the command line."""
    from tomgym.training.rl.learning import NAIVE_LIAR

    specs = {"naive_liar": NAIVE_LIAR}
    if args.run is not None:
        report = Path(args.run) / "bench_learning.json"
        try:
            run_specs = json.loads(report.read_text())["policy_specs"]
            specs.update({stage: run_specs[stage] for stage in ("warmstart", "grpo")})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"--run {args.run}: no finished learning report ({exc})") from None
    for stage in ("warmstart", "grpo"):
        given = getattr(args, f"{stage}_spec")
        if given is not None:
            specs[stage] = given
        if stage not in specs:
            raise SystemExit(f"no {stage} policy: pass --run or --{stage}-spec")
    return specs


def training_overlap(pool: list[Any], training: list[Any]) -> dict[str, int]:
    """How many scenarios of `pool` share a universe or a true path with the `training` pool's."""

    def universe(scenario: Any) -> str:
        return json.dumps(scenario.universe.to_dict(), sort_keys=True)

    universes = {universe(s) for s in training}
    paths = {tuple(s.ground_truth) for s in training}
    return {
        "universes": sum(universe(s) in universes for s in pool),
        "true_paths": sum(tuple(s.ground_truth) in paths for s in pool),
    }


def merged(parts: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """`score_stage` results of disjoint games (one per split) as one."""
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for metric, values in part.items():
            out.setdefault(metric, {}).update(values)
    return out


def summary(scores: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Rates per stage and the GRPO policy's paired differences over the warm start."""
    from tomgym.training.rl.learning import PAIRED, SCENARIO, grpo_minus, stage_rates

    report: dict[str, Any] = {
        "games": len(scores["grpo"]["fooling"]),
        "scenarios": len(set(scores["grpo"][SCENARIO].values())),
        **stage_rates(scores),
    }
    for label in PAIRED:
        report[f"grpo_minus_warmstart_{label}"] = grpo_minus(scores, "warmstart", label)
    return report


def score_splits(
    specs: dict[str, str],
    cfg: Any,
    out: Path,
    splits: list[str],
    benchmark_seed: int,
    concurrency: int = 32,
) -> tuple[dict[str, dict[str, dict[str, dict[str, Any]]]], dict[str, dict[str, float]]]:
    """Every stage scored (or read back, when finished) on every split of `benchmark_seed`,
    each in OUT/<split>/<stage folder>: (scores per split and stage, seconds per stage and
    split)."""
    from tomgym.training.rl.learning import score_stage, stage_folder

    by_split: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    eval_seconds: dict[str, dict[str, float]] = {}
    for split in splits:
        for stage in STAGES:
            t0 = time.perf_counter()
            by_split.setdefault(split, {})[stage] = score_stage(
                specs[stage],
                cfg,
                None,
                out / split / stage_folder(stage, cfg, 1),
                concurrency=concurrency,
                split=split,
                benchmark_seed=benchmark_seed,
            )
            eval_seconds.setdefault(stage, {})[split] = time.perf_counter() - t0
            logging.info("%s %s scored in %.0f s", split, stage, eval_seconds[stage][split])
    return by_split, eval_seconds


def over_splits(
    by_split: dict[str, dict[str, dict[str, dict[str, Any]]]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per stage, the scores of every split as one."""
    return {stage: merged([stages[stage] for stages in by_split.values()]) for stage in STAGES}


def loss_reasons(scores: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, int]]:
    """Per stage, how many games each loss reason names."""
    from tomgym.training.eval.loss_reasons import count_reasons
    from tomgym.training.rl.learning import LOSS_REASON

    return {stage: count_reasons(scores[stage][LOSS_REASON].values()) for stage in STAGES}


def seed_keyed(part: dict[str, dict[str, Any]], seed: int) -> dict[str, dict[str, Any]]:
    """`score_stage` results with every game id, and every scenario id, prefixed by its
    benchmark seed: each seed's benchmark numbers its scenarios (and so its games) alike."""
    from tomgym.training.rl.learning import SCENARIO

    return {
        metric: {
            f"seed{seed}/{game}": f"seed{seed}/{value}" if metric == SCENARIO else value
            for game, value in values.items()
        }
        for metric, values in part.items()
    }


def pooled_report(args: argparse.Namespace, cfg: Any) -> dict[str, Any]:
    """The finished outputs in `args.pool`, read back and paired as one pool (module doc)."""
    reports = []
    for folder in map(Path, args.pool):
        try:
            reports.append((folder, json.loads((folder / "bench_heldout.json").read_text())))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"--pool {folder}: no finished held-out report ({exc})") from None
    seeds = [report["pool"]["benchmark_seed"] for _, report in reports]
    if len(set(seeds)) < len(seeds):
        raise SystemExit(f"--pool: one benchmark seed twice ({seeds}); pool different seeds")
    specs = reports[0][1]["policy_specs"]
    for folder, report in reports[1:]:
        if report["policy_specs"] != specs:
            raise SystemExit(
                f"--pool {folder}: other policies than {reports[0][0]} "
                f"({report['policy_specs']} vs {specs})"
            )
    by_seed = {}
    for (folder, report), seed in zip(reports, seeds, strict=True):
        # Finished, so read back: a folder of other settings raises, none is replayed.
        by_split, _ = score_splits(specs, cfg, folder, report["pool"]["splits"], seed)
        by_seed[seed] = {
            stage: seed_keyed(scores, seed) for stage, scores in over_splits(by_split).items()
        }
    scores = {stage: merged([parts[stage] for parts in by_seed.values()]) for stage in STAGES}
    return {
        "pool": {
            "benchmark_seeds": seeds,
            "outputs": [str(folder) for folder, _ in reports],
            "scenarios_in_pool": sum(report["pool"]["scenarios_in_pool"] for _, report in reports),
            "overlap": {
                key: sum(report["pool"]["overlap"][key] for _, report in reports)
                for key in ("universes", "true_paths")
            },
        },
        "policy_specs": specs,
        **summary(scores),
        "loss_reasons": loss_reasons(scores),
        "by_seed": {str(seed): summary(stages) for seed, stages in by_seed.items()},
    }


def main(argv: list[str] | None = None) -> int:
    from tomgym.envs.tomsb.benchmark import load_benchmark

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    started = time.perf_counter()
    cfg = load_config(argparse.Namespace(config=args.config, seed=0, overrides=args.overrides))
    if args.pool is not None:
        if args.run or args.warmstart_spec or args.grpo_spec:
            raise SystemExit(
                "--pool reads finished outputs (their own policies): drop --run/--*-spec"
            )
        report = pooled_report(args, cfg)
        report["wall_seconds"] = time.perf_counter() - started
        if args.out is not None:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / POOLED_REPORT).write_text(json.dumps(report, indent=2))
        print(json.dumps(report, default=str))
        return 0
    trained_seed = cfg.benchmark_seed
    if args.benchmark_seed == trained_seed:
        raise SystemExit(
            f"benchmark seed {trained_seed} is the training pool's (env_config.benchmark_seed): "
            "pick another --benchmark-seed, or score its validation split with bench.bench_learning"
        )
    specs = policy_specs(args)
    levels = sorted(set(cfg.prior_levels))
    benchmark = load_benchmark(args.benchmark_seed)
    pool = [
        s
        for split in args.splits
        for level in levels
        for s in benchmark.filter(split=split, prior_level=level)
    ]
    overlap = training_overlap(pool, load_benchmark(trained_seed).split("train"))
    out = Path(args.out or f"runs/bench_heldout/seed{args.benchmark_seed}")
    by_split, eval_seconds = score_splits(
        specs, cfg, out, args.splits, args.benchmark_seed, args.concurrency
    )
    scores = over_splits(by_split)
    report: dict[str, Any] = {
        "pool": {
            "benchmark_seed": args.benchmark_seed,
            "trained_on": {"benchmark_seed": trained_seed, "split": "train"},
            "splits": list(args.splits),
            "prior_levels": levels,
            "scenarios_in_pool": len(pool),
            "overlap": overlap,
        },
        "policy_specs": specs,
        **summary(scores),
        "loss_reasons": loss_reasons(scores),
        "by_split": {split: summary(stages) for split, stages in by_split.items()},
        "eval_seconds": eval_seconds,
        "wall_seconds": time.perf_counter() - started,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_heldout.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
