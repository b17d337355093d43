"""`tomgym eval`: evaluation runs into a run folder (see training/eval/jobs.py and docs/evaluation.md).

    tomgym eval tomsb --defender SPEC [--attackers base,cross_examiner,deception_aware,bluffing]
        [--split test] [--episodes-per-scenario 2] [--seeds 3] --out DIR [--concurrency 8]
        [--resume] [--max-scenarios N] [--prior-levels 1,2]
        [--max-attacker-turns T] [--max-retries R] [--prompt-variant NAME] [--no-report]
        [--judge SPEC]
    tomgym eval tomsb --judge SPEC --out DIR     (LLM-judge the finished run in DIR again)
    tomgym eval decrypto --models a,b [--mode all|competition|adhoc] [--interceptor SPEC]
        [--seeds 3] [--games 32] --out DIR [--concurrency 8] [--resume] [--tom pt,fb]
    tomgym eval replay --policy SPEC --role decoder|interceptor --games FILE --out DIR

Each run writes DIR/config.yaml, DIR/games.jsonl (appended as games end), DIR/summary.json and
DIR/tables/, then (unless --no-report) plots and the HTML transcripts (`tomgym report DIR`).
Bad input (unknown policy spec, split, mode, missing checkpoint or games file, corrupt JSONL,
a folder that already holds another run) prints one `error: ...` line on stderr and exits 1;
games already in DIR/games.jsonl are never touched. Ctrl-C exits 130 and keeps every finished
game; `--resume` continues.

Wiring: `add_subparser(subparsers)` registers `eval`; each leaf parser sets `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tomgym.agents.specs import split_specs
from tomgym.envs.decrypto.prompts import NUM_PROMPT_VARIANTS
from tomgym.envs.tomsb.prompts import DEFENDER_BASELINE_PROMPTS, DEFENDER_PROMPT_VARIANTS
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS

ATTACKERS_DEFAULT = ",".join(ATTACKER_VARIANTS)


def _report(args: argparse.Namespace) -> None:
    if args.no_report:
        return
    from tomgym.training.eval.report import make_report

    paths = make_report(args.out)
    print(f"report: {len(paths)} files under {args.out}")


def _print_tables(out: str) -> None:
    from pathlib import Path

    combined = Path(out) / "tables" / "all.md"
    if combined.exists():
        print(combined.read_text(encoding="utf-8"))


def _judge(args: argparse.Namespace) -> None:
    from tomgym.training.eval.judge import judge_folder

    result = judge_folder(args.out, args.judge)
    print(
        f"judge {result['judge']}: {result['judged']} episodes judged, "
        f"{result['skipped']} already judged, {result['unfinished']} unfinished"
    )


def _prior_levels(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise ValueError(
            f"--prior-levels takes integers 0-2, comma-separated; got {text!r}"
        ) from None


def _run_tomsb(args: argparse.Namespace) -> int:
    from tomgym.training.eval.jobs import evaluate_tomsb
    from tomgym.training.eval.plans import (
        GameSettings,
        check_settings,
        env_config_of,
        prompt_variant,
    )

    if args.defender is None:
        if args.judge is None:
            raise ValueError(
                "--defender is required (or --judge SPEC alone, to judge the finished run in --out)"
            )
        _judge(args)
        _print_tables(args.out)
        _report(args)
        return 0
    if args.judge is not None:
        from tomgym.training.eval.judge import judge_label

        judge_label(args.judge)  # a bad judge spec fails before any game is played
    settings = GameSettings(
        max_attacker_turns=args.max_attacker_turns, max_retries=args.max_retries
    )
    check_settings("tomsb", settings)
    env_config = env_config_of("tomsb", settings)
    if args.prompt_variant is not None:
        env_config["prompt_variant"] = prompt_variant("tomsb", args.prompt_variant)
    evaluate_tomsb(
        args.defender,
        split_specs(args.attackers),
        split=args.split,
        episodes_per_scenario=args.episodes_per_scenario,
        seeds=args.seeds,
        out_dir=args.out,
        concurrency=args.concurrency,
        resume=args.resume,
        max_scenarios=args.max_scenarios,
        benchmark_seed=args.benchmark_seed,
        env_config=env_config,
        progress=not args.quiet,
        scenarios_file=args.scenarios,
        prior_levels=_prior_levels(args.prior_levels),
    )
    if args.judge is not None:
        _judge(args)
    _print_tables(args.out)
    _report(args)
    return 0


def _run_decrypto(args: argparse.Namespace) -> int:
    from tomgym.training.eval.jobs import evaluate_decrypto
    from tomgym.training.eval.plans import parse_tom, prompt_variant

    env_config: dict[str, Any] = {}
    if args.tom:
        env_config["tom"] = list(parse_tom(args.tom))
    if args.prompt_variant is not None:
        env_config["prompt_variant"] = prompt_variant("decrypto", args.prompt_variant)
    evaluate_decrypto(
        split_specs(args.models),
        mode=args.mode,
        seeds=args.seeds,
        games=args.games,
        out_dir=args.out,
        concurrency=args.concurrency,
        resume=args.resume,
        interceptor=args.interceptor,
        env_config=env_config,
        progress=not args.quiet,
    )
    _print_tables(args.out)
    _report(args)
    return 0


def _run_replay(args: argparse.Namespace) -> int:
    from tomgym.training.eval.replay import replay_decrypto

    replay_decrypto(
        args.policy,
        args.role,
        args.games,
        args.out,
        concurrency=args.concurrency,
        resume=args.resume,
        progress=not args.quiet,
    )
    _print_tables(args.out)
    _report(args)
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="run folder to write (or resume)")
    parser.add_argument("--concurrency", type=int, default=8, help="games played at once")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--no-report", action="store_true", help="skip plots and HTML")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `eval` with its `tomsb`, `decrypto` and `replay` subcommands."""
    from tomgym.training.eval.plans import setting_help

    parser = subparsers.add_parser("eval", help="evaluate policies into a run folder")
    kinds = parser.add_subparsers(dest="eval_kind", metavar="{tomsb,decrypto,replay}")
    kinds.required = True

    tomsb = kinds.add_parser("tomsb", help="a TOM-SB defender against attacker variants")
    tomsb.add_argument(
        "--defender", default=None, help="policy spec of the defender (omit it with --judge)"
    )
    tomsb.add_argument(
        "--attackers",
        default=ATTACKERS_DEFAULT,
        help="comma-separated: variant names, policy specs, or VARIANT=SPEC",
    )
    tomsb.add_argument("--split", default="test", help="train | validation | test")
    tomsb.add_argument("--episodes-per-scenario", type=int, default=2)
    tomsb.add_argument("--seeds", type=int, default=3)
    tomsb.add_argument("--max-scenarios", type=int, default=None, help="a stratified subset")
    tomsb.add_argument("--max-attacker-turns", type=int, default=None)
    tomsb.add_argument("--max-retries", type=int, default=None, help=setting_help("max_retries"))
    tomsb.add_argument(
        "--prior-levels",
        default=None,
        help="only scenarios at these attacker prior levels, comma-separated (1,2 = the "
        "paper's hard scenarios)",
    )
    tomsb.add_argument("--benchmark-seed", type=int, default=0)
    tomsb.add_argument(
        "--scenarios",
        default=None,
        metavar="FILE",
        help="your own scenarios (JSON/JSONL, any format `tomgym scenarios validate` reads) "
        "instead of the benchmark split",
    )
    tomsb.add_argument(
        "--prompt-variant",
        default=None,
        help=f"defender system prompt by name: {', '.join(DEFENDER_PROMPT_VARIANTS)} (the "
        f"paper's prompted baselines: {', '.join(DEFENDER_BASELINE_PROMPTS)})",
    )
    tomsb.add_argument(
        "--judge",
        default=None,
        metavar="SPEC",
        help="also score every episode with an LLM judge (scripted:judge or an LLM spec) and "
        "report its agreement with the rules; without --defender, judge the run in --out",
    )
    _common(tomsb)
    tomsb.set_defaults(func=_run_tomsb)

    decrypto = kinds.add_parser("decrypto", help="Decrypto cross-play between models")
    decrypto.add_argument("--models", required=True, help="comma-separated policy specs")
    decrypto.add_argument("--mode", default="all", help="all | competition | adhoc")
    decrypto.add_argument("--interceptor", default=None, help="adhoc: the fixed interceptor")
    decrypto.add_argument("--seeds", type=int, default=3)
    decrypto.add_argument("--games", type=int, default=32, help="games per seed and matchup")
    decrypto.add_argument("--tom", default="", help="ToM experiments: pt,fb")
    decrypto.add_argument(
        "--prompt-variant",
        default=None,
        help=f"system prompt wording 0..{NUM_PROMPT_VARIANTS - 1} (default 0)",
    )
    _common(decrypto)
    decrypto.set_defaults(func=_run_decrypto)

    replay = kinds.add_parser("replay", help="a policy replays recorded Decrypto games")
    replay.add_argument("--policy", required=True, help="policy spec")
    replay.add_argument("--role", default="decoder", help="decoder | interceptor")
    replay.add_argument("--games", required=True, help="games.jsonl or human_games.json")
    _common(replay)
    replay.set_defaults(func=_run_replay)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m tomgym.scripts.eval_cmd tomsb ...`) = `tomgym eval ...`."""
    from tomgym.scripts.cli import main as cli_main

    return cli_main(["eval", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
