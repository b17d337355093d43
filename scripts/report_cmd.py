"""`tomgym report RUN_DIR`: regenerate tables, plots and the HTML transcripts of a run folder.

Everything is rebuilt from RUN_DIR/games.jsonl alone (no game is replayed), so a report can be
remade at any time, also while a run is still writing. Prints the paths written and the tables.
A missing folder, an empty or corrupt games.jsonl, or records that mix Decrypto and TOM-SB
print one `error: ...` line on stderr and exit 1 with nothing written (games.jsonl is only read,
never modified). Repeated game ids (folders written by versions without run-folder locks) print a
`warning: ...` line naming them; each game counts once. `--check` only prints those warnings and
exits 1 when there are any.

Wiring: `add_subparser(subparsers)` registers `report`; its parser sets `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def run_report(args: argparse.Namespace) -> int:
    from tomgym.training.eval.report import check_run_folder, make_report

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no such directory)")
    warnings = check_run_folder(run_dir)
    for line in warnings:
        print(line, file=sys.stderr)
    if getattr(args, "check", False):
        return 1 if warnings else 0
    # Errors (empty or corrupt games.jsonl ...) are reported by the CLI's one error layer.
    paths = make_report(run_dir)
    for path in paths:
        print(path)
    if not args.quiet:
        combined = run_dir / "tables" / "all.md"
        if combined.exists():
            print()
            print(combined.read_text(encoding="utf-8"))
    return 0


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `report`."""
    parser = subparsers.add_parser("report", help="tables, plots and HTML transcripts of a run")
    parser.add_argument("run_dir", help="a run folder (holds games.jsonl)")
    parser.add_argument("--quiet", action="store_true", help="print only the paths written")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check games.jsonl for repeated game ids (exit 1 when there are any)",
    )
    parser.set_defaults(func=run_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m tomgym.scripts.report_cmd RUN_DIR`) = `tomgym report`."""
    from tomgym.scripts.cli import main as cli_main

    return cli_main(["report", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
