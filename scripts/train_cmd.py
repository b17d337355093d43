"""`tomgym train CONFIG.yaml [key=value ...] [--resume]`: multi-turn Dr. GRPO training.

`scripts.cli` calls `add_subparser(subparsers)`; the parser's `func` runs the job. Every user
error (a bad config value, malformed YAML, a missing model, a resume that does not match its run
folder) is one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

DESCRIPTION = """\
Train one role of a tomgym environment (TOM-SB defender, Decrypto encoder, ...) with multi-turn
Dr. GRPO (TRL). CONFIG.yaml sets the fields below; key=value overrides follow it and are parsed
by the field's type (learning_rate=1e-4, use_lora=false, attackers=[base,bluffing] or
attackers=base,bluffing, reward_weights={fooling: 1, format: 0.5}). Every value is checked before
anything is loaded. --resume continues the run in output_dir from its last completed stage
(SFT warm start, then the last checkpoint) and refuses a config that differs from the run's.
--warmstart-only runs the SFT warm start alone: its merged model (output_dir/sft/model, with the
tokenizer) is a policy spec `hf:<output_dir>/sft/model` and a starting point for later runs
(`model=<output_dir>/sft/model sft_warmstart=false`)."""


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="train a role with multi-turn Dr. GRPO (TRL)",
        description=DESCRIPTION,
        epilog=_fields_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?", help="YAML config (see training/configs/)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of config fields")
    parser.add_argument(
        "--resume", action="store_true", help="resume the run in output_dir (same config)"
    )
    parser.add_argument(
        "--warmstart-only",
        action="store_true",
        help="run only the SFT warm start (a cached starting point in output_dir/sft/model)",
    )
    parser.add_argument(
        "--help-config", action="store_true", help="list every config field with its help"
    )
    parser.set_defaults(func=run)
    return parser


def _fields_epilog() -> str:
    from tomgym.training.rl.train_config import TrainConfig

    return "config fields:\n" + "\n".join(f"  {line}" for line in TrainConfig.describe_fields())


def run(args: argparse.Namespace) -> int:
    from tomgym.training.rl.train_config import ConfigError, TrainConfig

    if args.help_config:
        print("\n".join(TrainConfig.describe_fields()))
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
    from tomgym.training.rl.trainer import end_distributed, train

    try:
        summary = train(config, resume=args.resume, warmstart_only=args.warmstart_only)
    except ConfigError as exc:
        print(f"tomgym train: {exc}", file=sys.stderr)
        return 2
    end_distributed()
    if args.warmstart_only:
        print(json.dumps({"sft_model": summary["sft_model"], **summary["sft_warmstart"]}))
        return 0
    print(json.dumps({"best": summary.get("best"), "grpo": summary.get("grpo")}, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tomgym")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
