"""The `tomgym` command: play, eval, train, human, scenarios, report, demo.

Each subcommand lives in its own module with an `add_subparser(subparsers)` function; leaf
parsers set `func(args) -> int` (the exit code). `main` is the one error-handling layer: errors
the user can fix print one `error: ...` line on stderr and exit 1, Ctrl-C exits 130; nothing
already written is lost. Each subcommand module's own `main(argv)` runs through it. Before
anything runs, `tomgym.redaction.install()` routes stdout, stderr and logging through the
redaction layer, so no API key or bearer token reaches the terminal or a log (tracebacks too).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tomgym import redaction

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
    redaction.install()
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
    except (ValueError, KeyError, OSError, RuntimeError, ImportError) as exc:
        # str(KeyError) quotes its key; every other message is printed as it is, quotes kept.
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        message = redaction.redact(" ".join(text.split())) or type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
