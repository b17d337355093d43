"""`tomgym play <decrypto|tomsb>`: run games between chosen policies into a run folder."""

from __future__ import annotations

import argparse
import sys
from typing import Any

GAMES = {
    "decrypto": {
        "env_id": "tomgym/decrypto-v0",
        "agents": ["encoder_0", "decoder_0", "interceptor_0"],
        "defaults": {
            "encoder_0": "embedding",
            "decoder_0": "embedding",
            "interceptor_0": "embedding",
        },
    },
    "tomsb": {
        "env_id": "tomgym/tomsb-v0",
        "agents": ["attacker_0", "defender_0"],
        "defaults": {"attacker_0": "scripted:base", "defender_0": "default"},
    },
}
ATTACKER_VARIANTS = ("base", "cross_examiner", "deception_aware", "bluffing")


def add_subparser(subparsers: Any) -> None:
    parser = subparsers.add_parser("play", help="play games between policies and save them")
    parser.add_argument("game", choices=sorted(GAMES))
    add_play_arguments(parser)
    parser.set_defaults(func=run_play)


def add_play_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="AGENT=SPEC",
        help="policy spec for an agent (repeatable); see training/policy_specs.py",
    )
    parser.add_argument("--games", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
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
    # Decrypto
    parser.add_argument("--max-rounds", type=int, default=None)
    parser.add_argument("--tom", default="", help="comma list: perspective_taking,false_belief")
    parser.add_argument("--play-on", action="store_true")
    parser.add_argument("--prompt-variant", type=int, default=None)
    # TOM-SB
    parser.add_argument("--split", default="test")
    parser.add_argument("--prior-level", type=int, default=None, choices=[0, 1, 2])
    parser.add_argument("--max-attacker-turns", type=int, default=None)
    parser.add_argument("--reveal-prior", action="store_true")


def game_plan(
    args: argparse.Namespace, specs: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(env_config, reset options shared by every game) from the command line."""
    env_config: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if args.game == "decrypto":
        if args.max_rounds is not None:
            env_config["max_rounds"] = args.max_rounds
        if args.tom:
            options["tom"] = [t.strip() for t in args.tom.split(",") if t.strip()]
        if args.play_on:
            options["play_on"] = True
        if args.prompt_variant is not None:
            options["prompt_variant"] = args.prompt_variant
    else:
        if args.max_attacker_turns is not None:
            env_config["max_attacker_turns"] = args.max_attacker_turns
        options["split"] = args.split
        if args.prior_level is not None:
            options["prior_level"] = args.prior_level
        if args.reveal_prior:
            options["reveal_prior"] = True
        attacker = specs["attacker_0"]
        if attacker.startswith("scripted:") and attacker.partition(":")[2] in ATTACKER_VARIANTS:
            options["attacker"] = attacker.partition(":")[2]
    return env_config, options


def run_play(args: argparse.Namespace) -> int:
    from tomgym.training.policy_specs import build_policies, parse_agent_specs
    from tomgym.training.run_folder import RunFolder
    from tomgym.training.runner import GameSpec, play_games

    game = GAMES[args.game]
    if args.games < 1:
        raise ValueError("--games must be >= 1")
    specs = parse_agent_specs(args.agent, game["defaults"], game["agents"])
    env_config, options = game_plan(args, specs)
    config = {
        "command": "play",
        "env_id": game["env_id"],
        "agents": specs,
        "games": args.games,
        "seed": args.seed,
        "concurrency": args.concurrency,
        "env_config": env_config,
        "options": options,
    }
    folder = RunFolder(args.out) if args.out else None
    done: set[str] = set()
    if folder is not None:
        folder.start(config, resume=args.resume)
        done = folder.completed_ids()
    todo = [
        GameSpec(f"{args.game}-s{args.seed}-{i:05d}", args.seed + i, options)
        for i in range(args.games)
        if f"{args.game}-s{args.seed}-{i:05d}" not in done
    ]
    policies = build_policies(specs, seed=args.seed)

    def on_record(record: dict[str, Any]) -> None:
        if folder is not None:
            folder.append(record)
        if args.print_games:
            print(render_record(record))

    try:
        records = play_games(
            game["env_id"],
            todo,
            policies,
            concurrency=args.concurrency,
            env_config=env_config,
            on_record=on_record,
            progress=sys.stderr.isatty(),
            record_prompts=not args.no_prompts,
        )
    finally:
        for policy in {id(p): p for p in policies.values()}.values():
            policy.close()
    all_records = folder.records() if folder is not None else records
    summary = summarize_run(all_records)
    if folder is not None:
        folder.write_summary(summary)
        print(f"{len(all_records)} games in {folder.path} ({len(records)} played now)")
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
