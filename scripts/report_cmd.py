"""`tomgym report RUN_DIR`: regenerate tables, plots and the HTML transcripts of a run folder.

Everything is rebuilt from RUN_DIR/games.jsonl alone (no game is replayed), so a report can be
remade at any time, also while a run is still writing. Prints the paths written and the tables.
A missing folder, an empty or corrupt games.jsonl prints one `error: ...` line on stderr and
exits 1 (games.jsonl is only read, never modified).

Wiring: `add_subparser(subparsers)` registers `report`; its parser sets `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _error(message: object) -> int:
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return 1


def run_report(args: argparse.Namespace) -> int:
    from tomgym.training.eval.metrics import MetricsError
    from tomgym.training.eval.report import make_report
    from tomgym.training.run_folder import RunFolderError

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        return _error(f"{run_dir} is not a run folder (no such directory)")
    try:
        paths = make_report(run_dir)
    except (RunFolderError, MetricsError, ValueError, OSError, KeyError) as exc:
        return _error(exc)
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
    parser.set_defaults(func=run_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m tomgym.scripts.report_cmd RUN_DIR`), same as `tomgym report`."""
    parser = argparse.ArgumentParser(prog="tomgym")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
