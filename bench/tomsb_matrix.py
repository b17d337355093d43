"""Behaviour matrix: every scripted TOM-SB defender against every scripted attacker.

    python -m bench.tomsb_matrix --split test --episodes-per-scenario 1 [--json]

Prints a Markdown table of outcome rates (fooled / extracted / detected / baited) per
(defender, attacker) pair over the chosen benchmark split, all scenarios and hard ones (prior
level 1-2) apart; `--json` prints the same numbers as JSON. The episodes run through the
PettingZoo env with the scripted policies (`tomgym.agents.tomsb_matrix.run_matrix`), exactly as
a training or evaluation run plays them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES
from tomgym.agents.tomsb_matrix import EpisodeResult, outcome_rates, run_matrix
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.game import OUTCOMES
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS


def summarise(table: dict[str, dict[str, list[EpisodeResult]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d, row in table.items():
        for a, results in row.items():
            hard = [r for r in results if r.prior_level > 0]
            out.setdefault(d, {})[a] = {"all": outcome_rates(results), "hard": outcome_rates(hard)}
    return out


def markdown(summary: dict[str, Any]) -> str:
    head = "| defender | attacker | n | " + " | ".join(OUTCOMES) + " | hard n | hard fooled |"
    lines = [head, "|" + "---|" * (len(OUTCOMES) + 5)]
    for d, row in summary.items():
        for a, cell in row.items():
            rates, hard = cell["all"], cell["hard"]
            vals = " | ".join(f"{rates[o]:.2f}" for o in OUTCOMES)
            lines.append(
                f"| {d} | {a} | {int(rates['n'])} | {vals} | {int(hard['n'])} | "
                f"{hard['fooled']:.2f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
    parser.add_argument("--benchmark-seed", type=int, default=0)
    parser.add_argument("--episodes-per-scenario", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--defenders", nargs="+", default=list(DEFENDER_STRATEGIES))
    parser.add_argument("--attackers", nargs="+", default=list(ATTACKER_VARIANTS))
    parser.add_argument("--reveal-prior", action="store_true", help="oracle: defender sees prior")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args(argv)
    if args.episodes_per_scenario < 1:
        parser.error("--episodes-per-scenario must be at least 1")
    for name in args.defenders:
        if name not in DEFENDER_STRATEGIES:
            parser.error(f"unknown defender {name!r}; valid: {list(DEFENDER_STRATEGIES)}")
    for name in args.attackers:
        if name not in ATTACKER_VARIANTS:
            parser.error(f"unknown attacker {name!r}; valid: {list(ATTACKER_VARIANTS)}")

    scenarios = load_benchmark(args.benchmark_seed).split(args.split)
    start = time.perf_counter()
    table = run_matrix(
        scenarios,
        args.defenders,
        args.attackers,
        episodes_per_scenario=args.episodes_per_scenario,
        seed=args.seed,
        reveal_prior=args.reveal_prior,
    )
    elapsed = time.perf_counter() - start
    summary = summarise(table)
    episodes = sum(len(r) for row in table.values() for r in row.values())
    if args.json:
        meta = {
            "split": args.split,
            "benchmark_seed": args.benchmark_seed,
            "seed": args.seed,
            "episodes_per_scenario": args.episodes_per_scenario,
            "reveal_prior": args.reveal_prior,
            "episodes": episodes,
        }
        json.dump({"meta": meta, "rates": summary}, sys.stdout, indent=2)
        print()
    else:
        print(markdown(summary))
        print(
            f"\n{episodes} episodes ({len(scenarios)} {args.split} scenarios) in {elapsed:.1f}s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
