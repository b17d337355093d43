"""Behaviour matrix: every scripted TOM-SB defender against every scripted attacker.

    python -m bench.tomsb_matrix --split test --episodes-per-scenario 1 [--json]

Prints a Markdown table of outcome rates (fooled / extracted / detected / baited) per
(defender, attacker) pair over the chosen benchmark split, all scenarios and hard ones (prior
level 1-2) apart; `--json` prints the same numbers as JSON. By default the episodes run through
the PettingZoo env (`envs.tomsb.env.raw_env`) with the scripted policies, exactly as a
training or evaluation run would; `--driver pure` uses the faster pure-rules loop instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from tomgym.agents.base import Turn
from tomgym.agents.tomsb_defenders import (
    DEFENDER_STRATEGIES,
    EpisodeResult,
    make_scripted_tomsb_policy,
    outcome_rates,
    run_matrix,
)
from tomgym.envs.tomsb.attackers import VARIANTS
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.game import OUTCOMES
from tomgym.envs.tomsb.universe import Scenario


def run_matrix_env(
    scenarios: Sequence[Scenario],
    defenders: Sequence[str],
    attackers: Sequence[str],
    *,
    episodes_per_scenario: int,
    seed: int,
    reveal_prior: bool,
) -> dict[str, dict[str, list[EpisodeResult]]]:
    """`run_matrix` through the AEC env and the scripted `Policy` wrappers."""
    from tomgym.envs.tomsb.env import raw_env

    table: dict[str, dict[str, list[EpisodeResult]]] = {}
    env = raw_env(scenarios=list(scenarios))
    for d in defenders:
        for a in attackers:
            policies = {
                "attacker_0": make_scripted_tomsb_policy(a, seed),
                "defender_0": make_scripted_tomsb_policy(d, seed),
            }
            results = table.setdefault(d, {}).setdefault(a, [])
            for scenario in scenarios:
                for k in range(episodes_per_scenario):
                    game_id = f"{scenario.scenario_id}#{k}"
                    for policy in policies.values():
                        policy.reset(game_id)
                    env.reset(
                        seed=seed + k,
                        options={"scenario": scenario, "attacker": a, "reveal_prior": reveal_prior},
                    )
                    info: dict[str, Any] = {}
                    for agent in env.agent_iter():
                        obs, _, term, trunc, info = env.last()
                        if term or trunc:
                            env.step(None)
                            continue
                        env.step(policies[agent].act_batch([Turn(game_id, agent, obs)])[0])
                    results.append(
                        EpisodeResult(
                            scenario_id=scenario.scenario_id,
                            prior_level=scenario.prior_level,
                            defender=d,
                            attacker=a,
                            outcome=str(info["outcome"]),
                            attacker_turns=int(info["turns"]),
                            final_trust=-1,
                        )
                    )
    return table


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
    parser.add_argument("--attackers", nargs="+", default=list(VARIANTS))
    parser.add_argument("--reveal-prior", action="store_true", help="oracle: defender sees prior")
    parser.add_argument("--driver", choices=("env", "pure"), default="env")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args(argv)
    if args.episodes_per_scenario < 1:
        parser.error("--episodes-per-scenario must be at least 1")
    for name in args.defenders:
        if name not in DEFENDER_STRATEGIES:
            parser.error(f"unknown defender {name!r}; valid: {list(DEFENDER_STRATEGIES)}")
    for name in args.attackers:
        if name not in VARIANTS:
            parser.error(f"unknown attacker {name!r}; valid: {list(VARIANTS)}")

    scenarios = load_benchmark(args.benchmark_seed).split(args.split)
    start = time.perf_counter()
    runner = run_matrix_env if args.driver == "env" else run_matrix
    table = runner(
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
            "driver": args.driver,
            "reveal_prior": args.reveal_prior,
            "episodes": episodes,
        }
        json.dump({"meta": meta, "rates": summary}, sys.stdout, indent=2)
        print()
    else:
        print(markdown(summary))
        print(
            f"\n{episodes} episodes ({len(scenarios)} {args.split} scenarios, "
            f"driver {args.driver}) in {elapsed:.1f}s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
