"""`tomgym eval`: evaluation runs into a run folder (see training/evaluate.py and docs/evaluation.md).

    tomgym eval tomsb --defender SPEC [--attackers base,cross_examiner,deception_aware,bluffing]
        [--split test] [--episodes-per-scenario 2] [--seeds 3] --out DIR [--concurrency 8]
        [--resume] [--max-scenarios N] [--max-attacker-turns T] [--no-report]
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
from collections.abc import Callable
from typing import Any

ATTACKERS_DEFAULT = "base,cross_examiner,deception_aware,bluffing"
TOM_NAMES = {"pt": "perspective_taking", "fb": "false_belief"}


def _error(message: object) -> int:
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return 1


def _split_list(text: str) -> list[str]:
    """Comma-separated specs; a comma followed by key=value belongs to the previous spec
    ("hf:model,temperature=0.7,default" -> ["hf:model,temperature=0.7", "default"])."""
    items: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        head = part.split("=", 1)[0]
        if (
            items
            and "=" in part
            and ":" not in head
            and head not in ("base", "cross_examiner", "deception_aware", "bluffing")
        ):
            items[-1] += "," + part
        else:
            items.append(part)
    return items


def _guarded(run: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    """Run an evaluation; every expected failure becomes one error line and exit status 1."""

    def handler(args: argparse.Namespace) -> int:
        from tomgym.training.eval.metrics import MetricsError
        from tomgym.training.run_folder import RunFolderError
        from tomgym.training.runner import RunnerError

        try:
            run(args)
        except KeyboardInterrupt:
            print("interrupted: finished games are kept; rerun with --resume", file=sys.stderr)
            return 130
        except (ValueError, OSError, RunFolderError, RunnerError, MetricsError, KeyError) as exc:
            return _error(exc if str(exc) else type(exc).__name__)
        except ImportError as exc:
            return _error(f"a backend is not installed: {exc}")
        return 0

    return handler


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


def _run_tomsb(args: argparse.Namespace) -> None:
    from tomgym.training.eval.jobs import evaluate_tomsb

    env_config: dict[str, Any] = {}
    if args.max_attacker_turns is not None:
        env_config["max_attacker_turns"] = args.max_attacker_turns
    evaluate_tomsb(
        args.defender,
        _split_list(args.attackers),
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
    )
    _print_tables(args.out)
    _report(args)


def _run_decrypto(args: argparse.Namespace) -> None:
    from tomgym.training.eval.jobs import evaluate_decrypto

    env_config: dict[str, Any] = {}
    if args.tom:
        unknown = [
            t for t in args.tom.split(",") if t not in TOM_NAMES and t not in TOM_NAMES.values()
        ]
        if unknown:
            raise ValueError(f"unknown --tom experiment(s) {unknown}; valid: pt, fb")
        env_config["tom"] = [TOM_NAMES.get(t, t) for t in args.tom.split(",")]
    evaluate_decrypto(
        _split_list(args.models),
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


def _run_replay(args: argparse.Namespace) -> None:
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


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="run folder to write (or resume)")
    parser.add_argument("--concurrency", type=int, default=8, help="games played at once")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--no-report", action="store_true", help="skip plots and HTML")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `eval` with its `tomsb`, `decrypto` and `replay` subcommands."""
    parser = subparsers.add_parser("eval", help="evaluate policies into a run folder")
    kinds = parser.add_subparsers(dest="eval_kind", metavar="{tomsb,decrypto,replay}")
    kinds.required = True

    tomsb = kinds.add_parser("tomsb", help="a TOM-SB defender against attacker variants")
    tomsb.add_argument("--defender", required=True, help="policy spec of the defender")
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
    tomsb.add_argument("--benchmark-seed", type=int, default=0)
    _common(tomsb)
    tomsb.set_defaults(func=_guarded(_run_tomsb))

    decrypto = kinds.add_parser("decrypto", help="Decrypto cross-play between models")
    decrypto.add_argument("--models", required=True, help="comma-separated policy specs")
    decrypto.add_argument("--mode", default="all", help="all | competition | adhoc")
    decrypto.add_argument("--interceptor", default=None, help="adhoc: the fixed interceptor")
    decrypto.add_argument("--seeds", type=int, default=3)
    decrypto.add_argument("--games", type=int, default=32, help="games per seed and matchup")
    decrypto.add_argument("--tom", default="", help="ToM experiments: pt,fb")
    _common(decrypto)
    decrypto.set_defaults(func=_guarded(_run_decrypto))

    replay = kinds.add_parser("replay", help="a policy replays recorded Decrypto games")
    replay.add_argument("--policy", required=True, help="policy spec")
    replay.add_argument("--role", default="decoder", help="decoder | interceptor")
    replay.add_argument("--games", required=True, help="games.jsonl or human_games.json")
    _common(replay)
    replay.set_defaults(func=_guarded(_run_replay))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m tomgym.scripts.eval_cmd tomsb ...`), same as `tomgym eval ...`."""
    parser = argparse.ArgumentParser(prog="tomgym")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["eval", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
