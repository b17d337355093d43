"""`tomgym train CONFIG.yaml [key=value ...] [--resume]`: multi-turn Dr. GRPO training.

Wiring: `scripts.cli` calls `add_subparser(subparsers)`; the parser's `func` runs the job.
Overrides are parsed as YAML values (`max_steps=5`, `reward_weights={fooling: 1, format: 0.5}`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="train a role with multi-turn Dr. GRPO (TRL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?", help="YAML config (see training/configs/)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of config fields")
    parser.add_argument("--resume", action="store_true", help="resume from the last checkpoint")
    parser.add_argument(
        "--help-config", action="store_true", help="list every config field with its help"
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from tomgym.training.rl.train_config import ConfigError, TrainConfig

    if args.help_config:
        for name, text in TrainConfig.help().items():
            print(f"{name}: {text}")
        return 0
    if not args.config:
        print("tomgym train: a CONFIG.yaml is required (see training/configs/)", file=sys.stderr)
        return 2
    try:
        config = TrainConfig.load(args.config, args.overrides)
    except ConfigError as exc:
        print(f"tomgym train: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from tomgym.training.rl.trainer import train

    summary = train(config, resume=args.resume)
    print(json.dumps({"best": summary.get("best"), "grpo": summary.get("grpo")}, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tomgym")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
