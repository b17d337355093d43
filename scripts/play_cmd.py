"""`tomgym play <decrypto|tomsb>`: run games between chosen policies into a run folder.

The games, their settings and the run are `tomgym.training.eval.plans`; this module only reads
the command line and prints. A TOM-SB defender that is not given with `--agent` is the bundled
model (`default`), and the command says so on stderr. A rich progress bar shows on stderr unless
`--quiet`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tomgym.envs.decrypto.prompts import NUM_PROMPT_VARIANTS
from tomgym.envs.tomsb.prompts import DEFENDER_PROMPT_VARIANTS


def add_subparser(subparsers: Any) -> None:
    from tomgym.training.eval.plans import GAMES

    parser = subparsers.add_parser("play", help="play games between policies and save them")
    parser.add_argument("game", choices=sorted(GAMES))
    add_play_arguments(parser)
    parser.set_defaults(func=run_play)


def add_play_arguments(parser: argparse.ArgumentParser) -> None:
    from tomgym.training.eval.plans import setting_help

    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="AGENT=SPEC",
        help="policy spec for an agent (repeatable); see tomgym.agents.specs",
    )
    parser.add_argument("--games", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="seed of game 0 (game i: seed+i), >= 0")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--out", default=None, help="run folder (config.yaml, games.jsonl, summary.json)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue an interrupted run in --out"
    )
    parser.add_argument(
        "--print", dest="print_games", action="store_true", help="print each finished game"
    )
    parser.add_argument(
        "--no-prompts", action="store_true", help="do not store full prompts per turn"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--prompt-variant",
        default=None,
        help=f"decrypto: wording 0..{NUM_PROMPT_VARIANTS - 1}; tomsb: defender prompt "
        f"{', '.join(DEFENDER_PROMPT_VARIANTS)}",
    )
    decrypto = parser.add_argument_group("Decrypto only")
    decrypto.add_argument("--max-rounds", type=int, default=None)
    decrypto.add_argument("--tom", default="", help="comma list: perspective_taking,false_belief")
    decrypto.add_argument("--play-on", action="store_true")
    tomsb = parser.add_argument_group("TOM-SB only")
    tomsb.add_argument("--split", default=None, help="train | validation | test (default test)")
    tomsb.add_argument("--prior-level", type=int, default=None, choices=[0, 1, 2])
    tomsb.add_argument("--max-attacker-turns", type=int, default=None)
    tomsb.add_argument("--max-retries", type=int, default=None, help=setting_help("max_retries"))
    tomsb.add_argument("--reveal-prior", action="store_true")


def settings_from_args(args: argparse.Namespace) -> Any:
    """The `plans.GameSettings` of the command line (flags a leaf parser lacks stay unset)."""
    from tomgym.training.eval.plans import GameSettings, parse_tom

    return GameSettings(
        max_rounds=getattr(args, "max_rounds", None),
        tom=parse_tom(getattr(args, "tom", "") or ""),
        play_on=getattr(args, "play_on", False),
        split=getattr(args, "split", None),
        prior_level=getattr(args, "prior_level", None),
        max_attacker_turns=getattr(args, "max_attacker_turns", None),
        max_retries=getattr(args, "max_retries", None),
        reveal_prior=getattr(args, "reveal_prior", False),
        prompt_variant=getattr(args, "prompt_variant", None),
    )


def run_play(args: argparse.Namespace) -> int:
    from tomgym.training.eval.plans import PlayJob, game_info, game_plan, resolve_agents, run_job
    from tomgym.training.policy_specs import build_policies
    from tomgym.training.routing import distinct
    from tomgym.training.run_folder import RunFolder

    game = game_info(args.game)
    specs, llm_defaults = resolve_agents(game, args.agent)
    env_config, options = game_plan(game.name, settings_from_args(args), specs)
    job = PlayJob(game, specs, env_config, options, args.games, args.seed)
    for agent in llm_defaults:
        print(
            f"note: {agent} is played by {specs[agent]} (the bundled model); "
            f"choose another with --agent {agent}=SPEC",
            file=sys.stderr,
        )
    # Built before the folder is touched: a bad spec leaves nothing behind.
    policies = build_policies(specs, seed=args.seed)
    try:
        folder = RunFolder(args.out) if args.out else None
        if folder is not None:
            folder.start(job.config("play", concurrency=args.concurrency), resume=args.resume)

        def on_record(record: dict[str, Any]) -> None:
            if args.print_games:
                print(render_record(record), flush=True)

        played = run_job(
            job,
            policies,
            folder,
            concurrency=args.concurrency,
            progress=not args.quiet,
            record_prompts=not args.no_prompts,
            on_record=on_record,
        )
    finally:
        for policy in distinct(policies.values()):
            policy.close()
    all_records = folder.records() if folder is not None else played
    summary = summarize_run(all_records)
    if folder is not None:
        folder.write_summary(summary)
        print(f"{len(all_records)} games in {folder.path} ({len(played)} played now)")
    print_summary(summary)
    return 0


def summarize_run(records: list[dict[str, Any]]) -> dict[str, Any]:
    from tomgym.training.eval.metrics import summarize

    return summarize(records, group_by=None)


def print_summary(summary: dict[str, Any]) -> None:
    overall = summary.get("overall", summary)
    shown = {
        k: v for k, v in overall.items() if not k.endswith("_ci") and isinstance(v, int | float)
    }
    print("  ".join(f"{k}={v:.3g}" for k, v in shown.items()))


def render_record(record: dict[str, Any]) -> str:
    """A readable transcript of one episode record (kept turns and side questions)."""
    lines = [
        f"=== {record['game_id']} ({record['env_id']}, seed {record['seed']}) -> {record['outcome']}"
    ]
    for turn in record["turns"]:
        tag = " (side question)" if turn.get("side_question") else ""
        flag = "" if turn.get("valid", True) else f"  [invalid: {turn.get('error')}]"
        raw = " ".join(str(turn.get("raw", "")).split())
        lines.append(f"{turn['agent']}{tag}: {raw[:300]}{flag}")
    lines.append(f"rewards: {record['rewards']}")
    return "\n".join(lines)
