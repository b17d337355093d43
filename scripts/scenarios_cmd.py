"""`tomgym scenarios`: generate the TOM-SB benchmark files and validate scenario files.

Subcommands:
- `tomgym scenarios generate --out DIR [--seed N] [--universes N] [--force]` writes
  DIR/train.jsonl, DIR/validation.jsonl, DIR/test.jsonl, DIR/all.jsonl and a Hugging Face
  `DatasetDict` in DIR/hf (skipped with a note when `datasets` is not installed). Existing files
  are never overwritten without `--force`.
- `tomgym scenarios validate FILE` loads FILE in any recognised format (ours, the published raw
  scenario or transformed examples), checks every universe, ground truth and prior, and that no
  universe sits in two splits; prints counts per prior level and per split and exits 0, or prints
  one `error: ...` line to stderr and exits 1 (bad input raises ValueError; the CLI's one error
  layer, `tomgym.scripts.cli.main`, prints it).

Wiring: `add_subparser(subparsers)` registers `scenarios`; every leaf parser sets `func`, a
handler `func(args) -> int` returning the exit status, so the main CLI runs
`sys.exit(args.func(args))`. `run_scenarios_cli(argv)` runs the same commands standalone
(argv without the leading "scenarios"), for tests and `python -m tomgym.scripts.scenarios_cmd`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from pathlib import Path

from tomgym.envs.tomsb.benchmark import (
    DEFAULT_N_UNIVERSES,
    Benchmark,
    load_benchmark,
    to_hf_dataset,
    to_jsonl,
)
from tomgym.envs.tomsb.generator import SPLITS, generate_benchmark, split_by_universe, universe_key
from tomgym.envs.tomsb.loaders import load_scenarios

OUTPUT_FILES = tuple(f"{name}.jsonl" for name in (*SPLITS, "all")) + ("hf",)


def _build_benchmark(seed: int, universes: int) -> Benchmark:
    if universes == DEFAULT_N_UNIVERSES:
        return load_benchmark(seed)
    scenarios = generate_benchmark(seed=seed, n_universes=universes)
    by_id = {
        s.scenario_id: s for part in split_by_universe(scenarios, seed=seed).values() for s in part
    }
    return Benchmark(seed=seed, scenarios=tuple(by_id[s.scenario_id] for s in scenarios))


def _empty_splits(benchmark: Benchmark) -> list[str]:
    return [name for name in SPLITS if not benchmark.split(name)]


def cmd_generate(args: argparse.Namespace) -> int:
    """Handler of `scenarios generate`."""
    out = Path(args.out)
    if args.seed < 0:
        raise ValueError(f"--seed must be non-negative, got {args.seed}")
    if args.universes < 1:
        raise ValueError(f"--universes must be positive, got {args.universes}")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    existing = [name for name in OUTPUT_FILES if (out / name).exists()]
    if existing and not args.force:
        raise ValueError(f"{out} already holds {', '.join(existing)}; pass --force to overwrite")
    benchmark = _build_benchmark(args.seed, args.universes)
    # Checked before anything is written: an empty split is a file `validate` rejects.
    empty = _empty_splits(benchmark)
    if empty:
        smallest = next(
            (
                n
                for n in range(args.universes + 1, args.universes + 50)
                if not _empty_splits(_build_benchmark(args.seed, n))
            ),
            None,
        )
        hint = f" (--universes {smallest} is the smallest that works)" if smallest else ""
        raise ValueError(
            f"--universes {args.universes} leaves no universe for the {' and '.join(empty)} "
            f"split; every split needs one{hint}"
        )
    out.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        to_jsonl(benchmark.split(name), out / f"{name}.jsonl")
    to_jsonl(benchmark.scenarios, out / "all.jsonl")
    for name in SPLITS:
        part = benchmark.split(name)
        print(
            f"{out / f'{name}.jsonl'}: {len(part)} scenarios, {len({universe_key(s) for s in part})} universes"
        )
    print(f"{out / 'all.jsonl'}: {len(benchmark)} scenarios")
    try:
        import datasets
    except ImportError:
        print("note: `datasets` is not installed; skipped the Hugging Face copy (DIR/hf)")
        return 0
    datasets.disable_progress_bars()  # keep the command's output to its summary lines
    hf_dir = out / "hf"
    if hf_dir.exists():
        shutil.rmtree(hf_dir)  # only reached with --force (checked above)
    dataset = datasets.DatasetDict({name: to_hf_dataset(benchmark.split(name)) for name in SPLITS})
    dataset.save_to_disk(str(hf_dir))
    print(f"{hf_dir}: Hugging Face DatasetDict ({', '.join(SPLITS)})")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Handler of `scenarios validate`."""
    scenarios = load_scenarios(args.file)
    splits_of: dict[str, set[str]] = {}
    for s in scenarios:
        split = (s.extra or {}).get("split")
        if split is not None:
            if split not in SPLITS:
                raise ValueError(
                    f"{args.file}: scenario {s.scenario_id!r} has unknown split {split!r}"
                )
            splits_of.setdefault(universe_key(s), set()).add(split)
    leaks = {k: v for k, v in splits_of.items() if len(v) > 1}
    if leaks:
        key, found = next(iter(leaks.items()))
        raise ValueError(
            f"{args.file}: {len(leaks)} universe(s) appear in more than one split, "
            f"e.g. {key[:60]!r} in {sorted(found)}"
        )
    universes = {universe_key(s) for s in scenarios}
    print(f"{args.file}: {len(scenarios)} valid scenarios over {len(universes)} universes")
    levels = Counter(s.prior_level for s in scenarios)
    print("prior level: " + ", ".join(f"{lvl}: {levels.get(lvl, 0)}" for lvl in (0, 1, 2)))
    splits = Counter((s.extra or {}).get("split") for s in scenarios)
    if set(splits) == {None}:
        print("split: not recorded")
    else:
        parts = [f"{name}: {splits[name]}" for name in SPLITS if splits.get(name)]
        if splits.get(None):
            parts.append(f"none: {splits[None]}")
        print("split: " + ", ".join(parts))
    return 0


def _help(parser: argparse.ArgumentParser) -> object:
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show


def _add_commands(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=_help(parser))
    commands = parser.add_subparsers(dest="scenarios_command", metavar="{generate,validate}")
    gen = commands.add_parser(
        "generate",
        help="write the generated benchmark (train/validation/test/all JSONL and a HF dataset)",
        description="Generate the TOM-SB benchmark: 100 universes x 3 prior levels, split "
        "60/20/20 by universe.",
    )
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory")
    gen.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    gen.add_argument(
        "--universes",
        type=int,
        default=DEFAULT_N_UNIVERSES,
        help=f"number of universes (default {DEFAULT_N_UNIVERSES}; 3 scenarios each)",
    )
    gen.add_argument("--force", action="store_true", help="overwrite existing output files")
    gen.set_defaults(func=cmd_generate)
    val = commands.add_parser(
        "validate",
        help="check a scenario file (ours, published raw or transformed) and print counts",
    )
    val.add_argument("file", metavar="FILE", help="a .json or .jsonl scenario file")
    val.set_defaults(func=cmd_validate)


def add_subparser(subparsers: argparse._SubParsersAction) -> None:
    """Register `scenarios` (with `generate` and `validate`) on the main CLI's subparsers."""
    parser = subparsers.add_parser(
        "scenarios",
        help="generate or validate TOM-SB scenario files",
        description="Generate the TOM-SB benchmark or validate scenario files.",
    )
    _add_commands(parser)


def run_scenarios_cli(argv: list[str]) -> int:
    """Run `tomgym scenarios ARGV...` standalone; returns the exit status."""
    from tomgym.scripts.cli import main as cli_main

    try:
        return cli_main(["scenarios", *argv])
    except SystemExit as exc:  # argparse already printed its usage error
        return int(exc.code or 0)


if __name__ == "__main__":
    sys.exit(run_scenarios_cli(sys.argv[1:]))
