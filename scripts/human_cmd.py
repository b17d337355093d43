"""`tomgym human <decrypto|tomsb> --as AGENT [--as AGENT ...]`: play a game yourself in a terminal.

Each `--as` role is played by a person at this terminal (several roles = hot seat: the screen is
cleared and the keyboard handed over between them); every other agent by the policy given with
`--agent AGENT=SPEC` (defaults: Decrypto `embedding`, TOM-SB attacker `scripted:base` and
defender `scripted:tom_heuristic`). Finished games are saved like any other run: `config.yaml`,
`games.jsonl` (one episode record per game, written as soon as it ends) and `summary.json` in
`--out`. `:quit`, Ctrl-D or Ctrl-C stops: finished games are saved, and the answers already
given in the unfinished game go to `unfinished.jsonl` (replay it with `--resume`).

Also runnable as `python -m tomgym.scripts.human_cmd decrypto --as decoder_0 ...`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tomgym.training.eval.plans import GAMES

HUMAN_SPEC = "human"
UNFINISHED_FILE = "unfinished.jsonl"


def add_subparser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "human",
        help="play a game yourself in the terminal",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    games = parser.add_subparsers(dest="game", metavar="GAME", required=True)
    for game in GAMES:
        leaf = games.add_parser(game, help=f"play {game} (roles: {', '.join(GAMES[game].agents)})")
        _add_common_arguments(leaf, game)
        if game == "decrypto":
            leaf.add_argument(
                "--max-rounds", type=int, default=None, help="rounds to survive (default 8)"
            )
            leaf.add_argument(
                "--tom", default="", help="ToM side questions: perspective_taking,false_belief"
            )
            leaf.add_argument(
                "--play-on", action="store_true", help="keep playing after the game is decided"
            )
            leaf.add_argument("--prompt-variant", type=int, default=None, help="prompt wording 0-2")
        else:
            leaf.add_argument(
                "--max-attacker-turns", type=int, default=None, help="attacker turns (default 15)"
            )
            leaf.add_argument("--split", default="test", choices=["train", "validation", "test"])
            leaf.add_argument("--prior-level", type=int, default=None, choices=[0, 1, 2])
            leaf.add_argument(
                "--reveal-prior", action="store_true", help="tell the defender the attacker's prior"
            )
            leaf.add_argument(
                "--no-estimates",
                action="store_true",
                help="defender: do not ask the private estimate and trust each turn (repeat the last ones)",
            )
        leaf.set_defaults(func=run_human)


def _add_common_arguments(parser: argparse.ArgumentParser, game: str) -> None:
    agents = GAMES[game].agents
    parser.add_argument(
        "--as",
        dest="humans",
        action="append",
        required=True,
        choices=agents,
        metavar="AGENT",
        help=f"a role you play (repeat for hot seat): {', '.join(agents)}",
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="AGENT=SPEC",
        help="policy for another agent (repeatable); see tomgym.agents.specs",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the first game (game i uses seed+i)"
    )
    parser.add_argument("--games", type=int, default=1, help="games to play in a row")
    parser.add_argument(
        "--out", default=None, help="run folder (default runs/human/<game>-s<seed>-<time>)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue an interrupted run in --out"
    )
    parser.add_argument(
        "--no-clear", action="store_true", help="never clear the screen between players"
    )
    parser.add_argument(
        "--no-confirm", action="store_true", help="send answers without asking send? [Y/n/edit]"
    )


def plan(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """(agent -> spec with "human" for the --as roles, env_config, reset options) from the args."""
    from tomgym.scripts.play_cmd import settings_from_args
    from tomgym.training.eval.plans import game_plan, resolve_agents

    game = GAMES[args.game]
    humans = list(dict.fromkeys(args.humans))
    for item in args.agent:
        agent, _, spec = item.partition("=")
        if agent in humans and spec.strip() != HUMAN_SPEC:
            raise ValueError(f"{agent} is played by you (--as {agent}); drop --agent {item}")
    specs, _ = resolve_agents(game, args.agent, defaults=game.human_defaults)
    # `--agent X=human` is the same as `--as X`: every human role shares one terminal.
    humans += [a for a, s in specs.items() if s == HUMAN_SPEC and a not in humans]
    specs.update(dict.fromkeys(humans, HUMAN_SPEC))
    if args.games < 1:
        raise ValueError(f"--games must be >= 1, got {args.games}")
    env_config, options = game_plan(game.name, settings_from_args(args), specs)
    return specs, env_config, options


def game_over_text(record: dict[str, Any]) -> str:
    """What the players learn when a game ends (every secret is revealed then)."""
    from tomgym.training.eval.html_viewer import code_text

    infos = record.get("infos", {})
    first = next(iter(infos.values()), {}) if infos else {}
    lines = [f"Game over ({record['game_id']}): {record.get('outcome')}"]
    if "keywords" in first:
        words = ", ".join(f"{i}. {w}" for i, w in enumerate(first["keywords"], start=1))
        lines.append(f"Keywords: {words}")
        for r in first.get("rounds_detail", []):
            lines.append(
                f"  round {r.get('round')}: code {code_text(r.get('code'))}, hints {r.get('hints')}, "
                f"decoder {code_text(r.get('decoder_guess'))}, interceptor {code_text(r.get('interceptor_guess'))}"
            )
    if "ground_truth" in first:
        lines.append(f"True path: {first.get('ground_truth')}")
        lines.append(f"Attacker's final belief: {first.get('belief')}")
    rewards = ", ".join(f"{a} {r:+g}" for a, r in record.get("rewards", {}).items())
    lines.append(f"Rewards: {rewards}")
    return "\n".join(lines)


def save_unfinished(
    out: Path, env_id: str, specs: list[Any], unfinished: dict[str, list[dict[str, Any]]]
) -> Path | None:
    """Append the answers of games left unfinished to `unfinished.jsonl` (never to games.jsonl,
    which holds complete episode records only); returns the file, or None if there were none."""
    if not unfinished:
        return None
    seeds = {spec.game_id: spec.seed for spec in specs}
    path = out / UNFINISHED_FILE
    with path.open("a", encoding="utf-8") as handle:
        for game_id, turns in unfinished.items():
            entry = {
                "game_id": game_id,
                "env_id": env_id,
                "seed": seeds.get(game_id),
                "finished": False,
                "human_turns": turns,
            }
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return path


def _close(policies: dict[str, Any]) -> None:
    from tomgym.training.routing import distinct

    for policy in distinct(policies.values()):
        policy.close()


def run_human(args: argparse.Namespace) -> int:
    from tomgym.agents.human import HumanPolicy, HumanQuit
    from tomgym.training.eval.plans import PlayJob, run_job
    from tomgym.training.policy_specs import build_policies
    from tomgym.training.run_folder import RunFolder
    from tomgym.training.runner import RunnerError

    game = GAMES[args.game]
    specs, env_config, options = plan(args)
    job = PlayJob(game, specs, env_config, options, args.games, args.seed, prefix="human-")
    humans = [a for a, s in specs.items() if s == HUMAN_SPEC]
    out = (
        Path(args.out)
        if args.out
        else Path("runs", "human", f"{args.game}-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    human = HumanPolicy(
        clear_screen=not args.no_clear,
        confirm=not args.no_confirm,
        ask_estimates=not getattr(args, "no_estimates", False),
    )
    # Built before the run folder exists, so a bad spec leaves nothing behind.
    policies = build_policies({a: s for a, s in specs.items() if s != HUMAN_SPEC}, seed=args.seed)
    policies.update(dict.fromkeys(humans, human))
    folder = RunFolder(out)
    try:
        folder.start(job.config("human"), resume=args.resume)
        done = folder.completed_ids()
    except Exception:
        _close(policies)
        raise
    if all(g.game_id in done for g in job.games()):
        _close(policies)
        print(f"All {args.games} game(s) in {out} are already finished.")
        return 0
    played = 0

    def on_record(record: dict[str, Any]) -> None:
        nonlocal played
        played += 1
        print("\n" + game_over_text(record) + f"\nSaved to {folder.games_path}\n", flush=True)

    print(f"You play {', '.join(humans)} in {game.env_id}; games are saved in {out}", flush=True)
    status = 0
    try:
        # A person answers one game at a time.
        run_job(job, policies, folder, concurrency=1, progress=False, on_record=on_record)
    except (RunnerError, KeyboardInterrupt) as exc:
        if isinstance(exc, RunnerError) and not isinstance(exc.__cause__, HumanQuit):
            raise
        kept = save_unfinished(out, game.env_id, job.games(), human.unfinished_games())
        where = f"; your answers in the unfinished game are in {kept}" if kept else ""
        print(f"\nStopped: {played} finished game(s) saved in {out}{where}.", flush=True)
        status = 130
    finally:
        _close(policies)
        records = folder.records()
        if records:
            from tomgym.training.eval.metrics import summarize

            folder.write_summary(summarize(records, group_by=None))
    return status


def main(argv: list[str] | None = None) -> int:
    """`python -m tomgym.scripts.human_cmd ...` = `tomgym human ...` (same parser and error handling)."""
    from tomgym.scripts.cli import main as cli_main

    return cli_main(["human", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
