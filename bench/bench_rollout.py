"""Rollout benchmark: how fast the batched runner plays TOM-SB with an LLM defender, and how
close it gets to the raw speed of batched generation on the same work.

For each concurrency level (default 1, 8, 32 games at once) it plays `max(games, concurrency)`
TOM-SB episodes through `training.runner.play_games` with the default model (SmolLM2-135M-
Instruct via `agents.llm.make_llm_policy`, or `--model SPEC`) as the defender against scripted
attackers (variants cycled over games), recording every batch of chats the policy sends to the
backend. It then replays exactly those batches through the backend's plain batched `generate`
(same chats, sampling settings and seeds), so "runner" and "raw" rates are measured on identical
work. Printed as one JSON object:

    {"config": {...}, "levels": [{"concurrency", "games", "wall_seconds", "episodes_per_min",
      "completion_tokens", "tokens_per_s", "speedup_vs_1" (episodes/min over the 1-game level),
      "outside_model_share" (share of wall time not spent inside the LLM policy's act_batch,
      from RunStats), "outside_policies_share" (not inside any policy), "policy_calls",
      "raw": {"seconds", "completion_tokens", "tokens_per_s"}, "runner_vs_raw" (runner
      tokens/s over raw tokens/s), "outcomes": {...}}]}

The default workload is bounded to finish in a few minutes on a laptop CPU: 3 attacker turns
per game, so 2 defender answers (`--max-attacker-turns`), 48 new tokens per answer (`--max-new-tokens`), 1 re-ask
(`--max-retries`). Raise them (and `--levels 1,8,32,64`) to measure realistic workloads.

    python -m bench.bench_rollout [--levels 1,8,32] [--games 0] [--model default]
        [--max-new-tokens 48] [--max-attacker-turns 3] [--max-retries 1] [--num-threads N]
        [--temperature 0.7] [--split test] [--out bench.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

ATTACKERS = ("base", "cross_examiner", "deception_aware", "bluffing")


class _Recorder:
    """Wraps a backend's `generate` to keep every call (chats and sampling arguments)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.calls: list[tuple[list[Any], dict[str, Any]]] = []
        self._generate = backend.generate

    def __enter__(self) -> _Recorder:
        def generate(chats: Sequence[Any], **kwargs: Any) -> list[str]:
            self.calls.append(([list(map(dict, c)) for c in chats], dict(kwargs)))
            return self._generate(chats, **kwargs)

        self.backend.generate = generate
        return self

    def __exit__(self, *exc: object) -> None:
        del self.backend.generate  # back to the class method


def _games(n: int, split: str, offset: int) -> list[Any]:
    from tomgym.training.runner import GameSpec

    return [
        GameSpec(
            f"bench-{offset}-{i}",
            1000 * offset + i,
            {"split": split, "attacker": ATTACKERS[i % len(ATTACKERS)]},
        )
        for i in range(n)
    ]


def run_level(
    policy: Any, concurrency: int, games: int, args: argparse.Namespace
) -> dict[str, Any]:
    from tomgym.agents.tomsb_defenders import make_scripted_tomsb_policy
    from tomgym.training.evaluate import RoutedPolicy
    from tomgym.training.runner import RunStats, play_games

    backend = policy.backend
    attackers = {v: make_scripted_tomsb_policy(v, seed=0) for v in ATTACKERS}
    specs = _games(games, args.split, concurrency)
    # Scripted attackers of every variant behind one policy object, so the LLM defender's
    # batches hold the games of all variants.
    router = RoutedPolicy(
        {g.game_id: {"attacker_0": attackers[g.options["attacker"]]} for g in specs}
    )
    stats = RunStats()
    tokens_before = backend.stats.completion_tokens
    env_config = {
        "max_attacker_turns": args.max_attacker_turns,
        "max_retries": args.max_retries,
        "split": args.split,
    }
    with _Recorder(backend) as recorder:
        start = time.perf_counter()
        records = play_games(
            "tomgym/tomsb-v0",
            specs,
            {"defender_0": policy, "attacker_0": router},
            concurrency=concurrency,
            env_config=env_config,
            record_prompts=False,
            stats=stats,
        )
        wall = time.perf_counter() - start
    tokens = backend.stats.completion_tokens - tokens_before

    # The same batches again, straight through the backend: the raw rate on identical work.
    raw_before = backend.stats.completion_tokens
    raw_start = time.perf_counter()
    for chats, kwargs in recorder.calls:
        backend.generate(chats, **kwargs)
    raw_seconds = time.perf_counter() - raw_start
    raw_tokens = backend.stats.completion_tokens - raw_before

    model_seconds = stats.policy_seconds.get(policy.name, 0.0)
    outcomes: dict[str, int] = {}
    for record in records:
        outcomes[str(record["outcome"])] = outcomes.get(str(record["outcome"]), 0) + 1
    tokens_per_s = tokens / wall if wall else 0.0
    raw_rate = raw_tokens / raw_seconds if raw_seconds else 0.0
    return {
        "concurrency": concurrency,
        "games": games,
        "wall_seconds": round(wall, 3),
        "episodes_per_min": round(60 * games / wall, 3) if wall else None,
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens_per_s, 2),
        "outside_model_share": round(max(0.0, 1 - model_seconds / wall), 4) if wall else None,
        "outside_policies_share": round(stats.outside_policy_fraction, 4),
        "policy_calls": dict(stats.policy_calls),
        "generate_calls": len(recorder.calls),
        "raw": {
            "seconds": round(raw_seconds, 3),
            "completion_tokens": raw_tokens,
            "tokens_per_s": round(raw_rate, 2),
        },
        "runner_vs_raw": round(tokens_per_s / raw_rate, 3) if raw_rate else None,
        "outcomes": outcomes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_rollout", description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels")
    parser.add_argument("--games", type=int, default=0, help="games per level (0 = the level)")
    parser.add_argument("--min-games", type=int, default=4, help="at least this many per level")
    parser.add_argument("--model", default="default", help="LLM policy spec for the defender")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--max-attacker-turns", type=int, default=3)
    parser.add_argument("--max-retries", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--num-threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        print(
            f"error: --levels must be comma-separated integers, got {args.levels!r}",
            file=sys.stderr,
        )
        return 1
    if not levels or min(levels) < 1:
        print("error: --levels must hold positive integers", file=sys.stderr)
        return 1

    from tomgym.agents.llm import make_llm_policy

    overrides: dict[str, Any] = {
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "max_batch_size": max(levels),
    }
    if args.num_threads is not None:
        overrides["num_threads"] = args.num_threads
    load_start = time.perf_counter()
    try:
        policy = make_llm_policy(args.model, **overrides)
    except (ValueError, OSError, ImportError) as exc:
        print(f"error: cannot load {args.model!r}: {exc}", file=sys.stderr)
        return 1
    load_seconds = time.perf_counter() - load_start

    results = []
    for concurrency in levels:
        games = args.games or max(concurrency, args.min_games)
        results.append(run_level(policy, concurrency, games, args))
        print(json.dumps(results[-1]), file=sys.stderr)  # progress, one line per level
    base = next((r for r in results if r["concurrency"] == 1), None)
    for result in results:
        if base and base["episodes_per_min"]:
            result["speedup_vs_1"] = round(result["episodes_per_min"] / base["episodes_per_min"], 3)
    import torch

    report = {
        "config": {
            "model": args.model,
            "backend": policy.backend.describe(),
            "max_new_tokens": args.max_new_tokens,
            "max_attacker_turns": args.max_attacker_turns,
            "max_retries": args.max_retries,
            "temperature": args.temperature,
            "torch_threads": torch.get_num_threads(),
            "load_seconds": round(load_seconds, 2),
        },
        "levels": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    policy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
