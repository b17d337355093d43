"""The `tomgym` command: play, eval, train, human, scenarios, report, demo.

Each subcommand lives in its own module with an `add_subparser(subparsers)` function; leaf
parsers set `func(args) -> int` (the exit code). Errors the user can fix print one line on stderr
and exit non-zero; nothing already written is lost.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMAND_MODULES = (
    "tomgym.scripts.play_cmd",
    "tomgym.scripts.eval_cmd",
    "tomgym.scripts.train_cmd",
    "tomgym.scripts.human_cmd",
    "tomgym.scripts.scenarios_cmd",
    "tomgym.scripts.report_cmd",
    "tomgym.scripts.demo_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tomgym",
        description="Theory-of-mind games (Decrypto, TOM-SB) as multi-agent RL environments.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a subcommand not shipped in this build
                continue
            raise
        module.add_subparser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; finished games are saved (continue with --resume)", file=sys.stderr)
        return 130
    except (ValueError, KeyError, FileNotFoundError, RuntimeError) as exc:
        message = str(exc).strip("'\"") or type(exc).__name__
        print(f"tomgym: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
