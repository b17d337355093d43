"""Does Dr. GRPO make a better double agent? The learning benchmark, on a CPU.

Everything runs through the project's own machinery (`tomgym.training.rl.learning`), on
`training/configs/cpu_demo.yaml`'s game (TOM-SB, the bundled SmolLM2-135M-Instruct as defender,
the scripted base attacker, prior level 2, 5 attacker turns, the `compact_path` prompt):

  1. warm start: `tomgym train CONFIG --warmstart-only` (SFT on the scripted ToM-heuristic
     defender's games, LoRA merged). Cached: it runs only when `--warmstart` holds no finished
     one, so its minutes are paid once and the benchmark's own budget measures Dr. GRPO.
  2. Dr. GRPO: `tomgym train CONFIG model=<warm start> sft_warmstart=false` with the reward of
     `--reward` (fooling_tom, the default: fooling + ToM, ADA-Fooling+ToM; fooling:
     ADA-Fooling; tom: ADA-ToM; each plus the config's shaping terms if it sets any: format,
     stepwise_tom, leak_penalty, e.g. `'reward_weights={leak_penalty: 1}'`), with the config's
     off-policy guidance (`teacher_episodes_per_group: 1` in `cpu_demo.yaml`: one episode of
     every group played by the scripted teacher; `teacher_episodes_per_group=0` is on-policy).
  3. evaluation: `tomgym eval tomsb --defender SPEC` on the same held-out validation games
     (greedy, `--eval-episodes` games per scenario, each with its own attacker seed) for the
     base model, the warm start, the GRPO policy and the scripted naive in-universe liar
     (`scripted:naive`) as a reference.
  4. optional, `--sampled-episodes N`: the warm start and the GRPO policy again, sampling at the
     rollout temperature (`--sampled-temperature`), N games per scenario, paired by game
     (`sampled` in the output): the expected fooling rate of the policy Dr. GRPO optimises,
     with N games behind each scenario instead of one greedy game.

Each stage's model is a policy spec (`policy_specs` in the output) that `tomgym eval tomsb
--defender SPEC` loads, so the trained defender can be evaluated on other splits and attackers.
Stages already finished are reused, so an interrupted run continues where it stopped: the warm
start and the evaluations that do not depend on `--reward` (base, warm start, naive liar) live
under `--warmstart`, the GRPO run and its evaluation under `--out`. A finished evaluation is
reused only for the settings and the weights it was played with (the weights' fingerprint is
stored with it): one of other weights, a model trained again into a folder whose GRPO run was
deleted, say, is refused with the difference named.

Prints one JSON object on its last stdout line (also written to OUT/bench_learning.json):
`fooled_rate` and `tom_accuracy` per stage, paired-by-game bootstrap differences
(`grpo_minus_warmstart_fooled`, `grpo_minus_base_fooled`, the same for ToM, each with the games
that went `up` and `down`; the bootstrap resamples universes, so two games of one scenario, or
of one universe at two prior levels, do not count as independent; `eval_universes` counts them),
`loss_reasons` per stage (how its games ended: fooled, or the mistake each was lost on,
`tomgym.training.eval.loss_reasons`), the per-step train reward and the sampled episodes'
fooled share (`train_fooled_by_step`, whatever the reward; the model's episodes, the teacher's
apart in `teacher_fooled_by_step`),
`frac_zero_variance_groups` per step, rollout vs optimisation seconds per step, the warm
start's wall time (and whether it was cached), the Dr. GRPO stage's seed (`grpo_seed`), whether
belief values were constrained (`constrain_beliefs`: `constrain_beliefs=true` decodes them inside
the universe's names in the rollouts and in every model stage's evaluation, whose folders then end
in `_constrained`), whether the names in replies were kept spelled exactly (`constrain_replies`;
folders end in `_names`), whether whole answers were kept inside the protocol's JSON template
(`constrain_format`; folders end in `_format`), whether a defender's plan and reply were held
to its stated belief (`constrain_branches`; `_branches`) and to the one path its first decoy
opens (`constrain_story`; `_story`) and `policy_specs`.

    python -m bench.bench_learning [--reward fooling_tom|fooling|tom] [--steps 8]
        [--eval-games 20] [--eval-episodes 1] [--sampled-episodes 0] [--sampled-temperature T]
        [--seed 0] [--grpo-seed S] [--warmstart runs/bench_learning/warmstart]
        [--out runs/bench_learning/R]
        [--config CONFIG.yaml] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tomgym.training.rl.train_config import TrainConfig


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """The benchmark's arguments (`bench.bench_replicates` adds its seeds to the same ones)."""
    from tomgym.training.rl.learning import DEFAULT_METHOD, METHODS

    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reward", choices=METHODS, default=DEFAULT_METHOD)
    parser.add_argument("--steps", type=int, default=8, help="Dr. GRPO steps")
    parser.add_argument("--eval-games", type=int, default=20, help="held-out scenarios per stage")
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=1,
        help="games per scenario, each with its own attacker seed (the CI resamples universes)",
    )
    parser.add_argument(
        "--sampled-episodes",
        type=int,
        default=0,
        help="also score the warm start and the GRPO policy by sampling, N games per scenario",
    )
    parser.add_argument(
        "--sampled-temperature",
        type=float,
        default=None,
        help="temperature of the sampled evaluation (default: the config's rollout temperature)",
    )
    parser.add_argument("--warmstart", default="runs/bench_learning/warmstart")
    parser.add_argument("--out", default=None, help="default: runs/bench_learning/<reward>")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default=None, help="default: training/configs/cpu_demo.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides (as tomgym train)")
    return parser


def load_config(args: argparse.Namespace) -> TrainConfig:
    """The training config of the parsed `args`: `--config` (default `cpu_demo.yaml`), `--seed`
    and the key=value overrides."""
    from tomgym.training.rl.train_config import TrainConfig

    path = args.config or str(resources.files("tomgym.training") / "configs" / "cpu_demo.yaml")
    return TrainConfig.load(path, [f"seed={args.seed}", *args.overrides])


def learning_report(args: argparse.Namespace, grpo_seed: int | None, out: Path) -> dict[str, Any]:
    """One learning run of the parsed `args` with its Dr. GRPO stage seeded by `grpo_seed`, into
    `out` (also written to OUT/bench_learning.json)."""
    from tomgym.training.rl.learning import run_learning

    from bench.machine import describe_machine

    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config(args)
    report = {
        "machine": describe_machine(),
        "model": cfg.model,
        **run_learning(
            cfg,
            method=args.reward,
            steps=args.steps,
            eval_games=args.eval_games,
            eval_episodes=args.eval_episodes,
            sampled_episodes=args.sampled_episodes,
            sampled_temperature=args.sampled_temperature,
            grpo_seed=grpo_seed,
            warmstart_dir=Path(args.warmstart),
            out=out,
        ),
    }
    (out / "bench_learning.json").write_text(json.dumps(report, indent=2, default=str))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(__doc__)
    parser.add_argument(
        "--grpo-seed",
        type=int,
        default=None,
        help="seed of the Dr. GRPO stage alone (default: --seed): replicates from one warm start",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    out = Path(args.out or f"runs/bench_learning/{args.reward}")
    print(json.dumps(learning_report(args, args.grpo_seed, out), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
