"""Rollout benchmark: multi-turn TOM-SB episodes with and without the KV cache, on identical work.

The defender is the default model (SmolLM2-135M-Instruct through `agents.llm.make_llm_policy`,
or `--model SPEC`) against scripted attackers (variants cycled over games), greedy, with the same
seeds in both modes, played by `training.runner.play_games`. The two policies share one set of
weights; one keeps per-conversation KV caches (`kv_cache=true`, the default), the other encodes
every turn in full (`kv_cache=false`); both stop decoding at the close of the answer.

Measured, each for the cached and the uncached policy:
- at each concurrency level (default 1, 8, 32 games at once, `--turns` attacker turns each;
  `max(level, --min-games)` episodes, so level 1 plays 4 games one after another):
  episodes/min, prefilled tokens per episode (tokens actually fed to the model), the reused
  tokens taken from prompt prefixes shared with other games (`shared_prefix_tokens_per_episode`:
  games of one scenario; the seeded draw can repeat a scenario), completion tokens, the seconds
  per episode in prefill passes and in the token-by-token decode loop (the engine's
  `prefill_seconds` / `decode_seconds`), the share of wall time outside the model (not
  inside the defender's `act_batch`), the cached/uncached ratio of episodes/min
  (`cached_vs_uncached`), and the uncached/cached ratio of prefill seconds
  (`prefill_seconds_ratio`: what `cached_vs_uncached` would be if decoding cost nothing; both
  modes decode the same tokens, so the decode seconds pull the measured ratio below it);
- cost growth: seconds and prefilled tokens per episode at 4, 8 and 15 attacker turns
  (`--growth-turns`, at `--growth-concurrency` games), with the exponent of a least-squares fit
  `cost ~ turns^k` (1 = linear, 2 = quadratic);
- `identical_greedy`: every defender answer of every episode is the same with and without cache;
- the peak resident memory of the process and the peak number of cached tokens;
- `config.decode_kernel`: whether fp32 decode attention ran in the compiled kernel
  (`agents.llm.decode_kernel`; `TOMGYM_DECODE_KERNEL=0` measures torch's products instead);
- `packed_linear`: at `--linear-level` games (8 by default; 0 skips it), the cached policy
  with and without packed linear weights (`F.linear` instead of oneDNN's products with weights
  packed once, `agents.llm.packed_linear`), in `--linear-pairs` interleaved pairs (AB BA AB ...,
  so a machine whose speed drifts during the run does not favour the one played last): each
  run's episodes/min, the ratio of the medians, each pair's ratio, and whether every run's greedy
  answers were identical to the cached level's;
- `shared_prefixes`: at `--group-level` games (8; 0 skips it), every `--group-size` (4)
  consecutive games playing one scenario (against the attacker variants in turn, as a Dr. GRPO
  group or an evaluation against every variant would), the cached policy with and without
  shared prompt prefixes (`kv_cache_share_prefixes`), in `--group-pairs` interleaved pairs: the
  same measures plus each run's prefilled tokens per episode.

The defaults (32 new tokens per answer, growth at 4 games, one torch thread) keep the run short
on a 2-core CPU (the README's table: one 41-minute run, the linear comparison included, which
plays the `--linear-level` level `2 x --linear-pairs` more times); raise them for realistic
workloads.

Progress goes to stderr; the last line of stdout is one JSON object:

    {"config": {...}, "levels": [{"concurrency", "games", "cached": {...}, "uncached": {...},
      "cached_vs_uncached", "prefill_seconds_ratio"}],
     "cached_vs_uncached": {"1": r, "8": r, "32": r},
     "speedup_32_vs_1_cached", "growth": {"turns", "cached": {...}, "uncached": {...}},
     "identical_greedy": true|false, "packed_linear": {...}, "shared_prefixes": {...},
     "peak_rss_mb", "cache": {...}}

    python -m bench.bench_rollout [--levels 1,8,32] [--turns 8] [--min-games 4]
        [--growth-turns 4,8,15] [--growth-concurrency 4] [--max-new-tokens 32] [--max-retries 0] [--model default]
        [--num-threads 1] [--linear-level 8] [--linear-pairs 2] [--group-level 8] [--group-size 4]
        [--group-pairs 2] [--split test] [--out bench.json]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from typing import Any

from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS as ATTACKERS

from bench import paired

ENV_ID = "tomgym/tomsb-v0"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _games(n: int, split: str, tag: str, group_size: int = 1) -> list[Any]:
    """`n` games, attacker variants cycled; with `group_size` > 1 every `group_size` consecutive
    games play one scenario (the split's scenarios in order), as a Dr. GRPO group or an
    evaluation against every attacker variant does."""
    from tomgym.training.runner import GameSpec

    options = [{"split": split, "attacker": ATTACKERS[i % 4]} for i in range(n)]
    if group_size > 1:
        from tomgym.envs.tomsb.benchmark import load_benchmark

        scenarios = load_benchmark().filter(split=split)
        for i, game in enumerate(options):
            game["scenario"] = scenarios[(i // group_size) % len(scenarios)].scenario_id
    # The seed depends on the game's index only, so every level and mode plays the same games.
    return [GameSpec(f"bench-{tag}-{i}", 1000 + i, options[i]) for i in range(n)]


_FOLLOW_UPS = (
    "Tell me more about that, please.",
    "Can you say that again in other words?",
    "How sure are you about that?",
    "Is there anything else I should know?",
)


class FullLengthAttacker:
    """A scripted attacker that never ends the game itself: every answer signals "query again".

    The benchmark measures cost per episode length, so every episode must run to
    `max_attacker_turns`. Until the scripted attacker would conclude, its questions, trust and
    beliefs are its own; from then on the wrapper keeps its last assessment and asks generic
    follow-up questions (the scripted player has no moves after a conclusion).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"full_length({getattr(inner, 'name', 'attacker')})"
        self.concluded: dict[str, tuple[dict[str, Any], int]] = {}

    def reset(self, game_id: str) -> None:
        self.concluded.pop(game_id, None)
        self.inner.reset(game_id)

    def forget(self, game_id: str) -> None:
        self.concluded.pop(game_id, None)
        self.inner.forget(game_id)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "inner": self.inner.describe()}

    def act_batch(self, turns: Any) -> list[str]:
        from tomgym.envs.tomsb.game import SIGNAL_QUERY
        from tomgym.envs.tomsb.parsing import answer_attacker

        live = [t for t in turns if t.game_id not in self.concluded]
        answers = dict(zip((t.game_id for t in live), self.inner.act_batch(live), strict=True))
        out = []
        for turn in turns:
            if turn.game_id in answers:
                move = json.loads(answers[turn.game_id])
                if move["signal"] != SIGNAL_QUERY:
                    self.concluded[turn.game_id] = (move, 0)
            else:
                last, asked = self.concluded[turn.game_id]
                move = {**last, "prompt": _FOLLOW_UPS[asked % len(_FOLLOW_UPS)]}
                self.concluded[turn.game_id] = (last, asked + 1)
            out.append(answer_attacker(**{**move, "signal": SIGNAL_QUERY}))
        return out


def _defender_answers(record: dict[str, Any]) -> list[str]:
    """The defender's raw answers in an episode record, in order (for greedy comparison)."""
    return [str(turn["raw"]) for turn in record["turns"] if turn["agent"] == "defender_0"]


def play(
    policy: Any,
    concurrency: int,
    games: int,
    turns: int,
    args: argparse.Namespace,
    tag: str,
    group_size: int = 1,
) -> tuple[dict[str, Any], list[list[str]]]:
    """Play `games` episodes at `concurrency` (`_games`); returns (measurements, defender
    answers)."""
    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
    from tomgym.training.routing import RoutedPolicy
    from tomgym.training.runner import RunStats, play_games

    backend = policy.backend
    backend.invalidate_cache()  # every measurement starts cold
    specs = _games(games, args.split, tag, group_size)
    # Fresh scripted attackers per run (they keep per-game state), all variants behind one
    # policy object, so the defender's batches hold games of every variant.
    attackers = {
        v: FullLengthAttacker(make_scripted_tomsb_policy(v, seed=0)) if args.full_length
        else make_scripted_tomsb_policy(v, seed=0)
        for v in ATTACKERS
    }  # fmt: skip
    router = RoutedPolicy(
        {g.game_id: {"attacker_0": attackers[g.options["attacker"]]} for g in specs}
    )
    stats = RunStats()
    before = backend.cache_stats()
    completion_before = backend.stats.completion_tokens
    start = time.perf_counter()
    records = play_games(
        ENV_ID,
        specs,
        {"defender_0": policy, "attacker_0": router},
        concurrency=concurrency,
        env_config={
            "max_attacker_turns": turns,
            "max_retries": args.max_retries,
            "split": args.split,
        },
        record_prompts=False,
        stats=stats,
    )
    wall = time.perf_counter() - start
    after = backend.cache_stats()
    model_seconds = stats.policy_seconds.get(policy.name, 0.0)
    prefill = after["prefill_tokens"] - before["prefill_tokens"]
    prefill_seconds = after["prefill_seconds"] - before["prefill_seconds"]
    decode_seconds = after["decode_seconds"] - before["decode_seconds"]
    attacker_turns = [
        sum(1 for t in r["turns"] if t["agent"] == "attacker_0" and not t["side_question"])
        for r in records
    ]
    result = {
        "games": games,
        "wall_seconds": round(wall, 3),
        "episodes_per_min": round(60 * games / wall, 3),
        "seconds_per_episode": round(wall / games, 3),
        "prefill_tokens_per_episode": round(prefill / games, 1),
        "reused_tokens_per_episode": round(
            (after["reused_tokens"] - before["reused_tokens"]) / games, 1
        ),
        # Of those, taken from prefixes shared with other games (their first prompts).
        "shared_prefix_tokens_per_episode": round(
            (after["shared_prefix_tokens"] - before["shared_prefix_tokens"]) / games, 1
        ),
        "prefill_seconds_per_episode": round(prefill_seconds / games, 3),
        "decode_seconds_per_episode": round(decode_seconds / games, 3),
        "completion_tokens_per_episode": round(
            (backend.stats.completion_tokens - completion_before) / games, 1
        ),
        "prefix_mismatches": after["prefix_mismatches"] - before["prefix_mismatches"],
        "outside_model_share": round(max(0.0, 1 - model_seconds / wall), 4),
        "defender_turns": stats.policy_calls.get(policy.name, 0),
        "mean_attacker_turns": round(sum(attacker_turns) / len(attacker_turns), 2),
    }
    ordered = sorted(records, key=lambda r: str(r["game_id"]))
    return result, [_defender_answers(r) for r in ordered]


def compare_paths(
    paths: dict[str, Any],
    level: int,
    pairs: int,
    args: argparse.Namespace,
    reference: list[list[str]] | None,
    group_size: int = 1,
) -> dict[str, Any]:
    """Two settings of the cached policy (`paths`: name -> policy) at `level` games, `pairs`
    times each, the order alternating from pair to pair; each run's episodes/min and prefilled
    tokens per episode, and whether every run's greedy answers equal `reference` (else the
    first run's)."""
    names = list(paths)
    runs: dict[str, list[float]] = {name: [] for name in names}
    prefilled: dict[str, list[float]] = {name: [] for name in names}
    identical = True
    tag = f"c{level}" if group_size == 1 else f"g{level}x{group_size}"
    for pair, name in paired.interleaved(names, pairs):
        result, answers = play(
            paths[name], level, games_at(level, args), args.turns, args, tag, group_size
        )
        _log(f"level {level} cached, {name} (pair {pair + 1}): {json.dumps(result)}")
        runs[name].append(result["episodes_per_min"])
        prefilled[name].append(result["prefill_tokens_per_episode"])
        if reference is None:
            reference = answers
        identical &= answers == reference
    first, second = names
    compared = paired.summary(runs, first, second)
    return {
        "concurrency": level,
        "pairs": pairs,
        "episodes_per_min": runs,
        "prefill_tokens_per_episode": prefilled,
        "median_episodes_per_min": compared.pop("median"),
        **compared,
        "identical_greedy": identical,
    }


def games_at(concurrency: int, args: argparse.Namespace) -> int:
    """Episodes played at a concurrency level: one batch of `concurrency` games, and at least
    `--min-games`, so the one-game-at-a-time level is not a single episode's reading."""
    return max(concurrency, args.min_games)


def _fit_exponent(turns: list[int], costs: list[float]) -> float | None:
    """Least-squares slope of log(cost) on log(turns)."""
    points = [(math.log(t), math.log(c)) for t, c in zip(turns, costs, strict=True) if c > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    cov = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return round(cov / var, 3) if var else None


def _int_list(text: str, flag: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or min(values) < 1:
        raise ValueError(f"{flag} must hold positive integers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_rollout", description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels")
    parser.add_argument("--turns", type=int, default=8, help="attacker turns per episode")
    parser.add_argument(
        "--min-games",
        type=int,
        default=4,
        help="episodes played at least at each level (level 1 plays them one after another)",
    )
    parser.add_argument("--growth-turns", default="4,8,15", help="episode lengths to fit")
    parser.add_argument("--growth-concurrency", type=int, default=4)
    parser.add_argument("--model", default="default", help="LLM policy spec for the defender")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--max-retries", type=int, default=0)
    parser.add_argument(
        "--full-length",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="attackers never end a game early, so every episode has --turns attacker turns",
    )
    # One thread: on a shared, oversubscribed CPU it was much faster than two (docs/llm.md).
    parser.add_argument("--num-threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--linear-level",
        type=int,
        default=8,
        help="games at which to compare packed linear weights with F.linear (0: skip)",
    )
    parser.add_argument(
        "--linear-pairs",
        type=int,
        default=2,
        help="interleaved runs of each linear path at --linear-level (order alternates by pair)",
    )
    parser.add_argument(
        "--group-level",
        type=int,
        default=8,
        help="games at which to compare shared prompt prefixes on and off (0: skip)",
    )
    parser.add_argument(
        "--group-size",
        type=int,
        default=4,
        help="consecutive games that play one scenario in the --group-level comparison",
    )
    parser.add_argument(
        "--group-pairs",
        type=int,
        default=2,
        help="interleaved runs of each setting at --group-level (order alternates by pair)",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    try:
        levels = _int_list(args.levels, "--levels")
        growth_turns = _int_list(args.growth_turns, "--growth-turns") if args.growth_turns else []
        if args.min_games < 1:
            raise ValueError(f"--min-games must be at least 1, got {args.min_games}")
        for flag in ("linear_pairs", "group_pairs", "group_size"):
            if getattr(args, flag) < 1:
                name = "--" + flag.replace("_", "-")
                raise ValueError(f"{name} must be at least 1, got {getattr(args, flag)}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    from tomgym.agents.llm import LLMPolicy, make_llm_policy
    from tomgym.agents.llm.backends.hf import HFBackend

    from bench.machine import describe_machine

    machine = describe_machine()  # before any model loads: the idle machine's speed

    overrides: dict[str, Any] = {
        "max_new_tokens": args.max_new_tokens,
        "temperature": 0.0,
        # One batch holds every game of the largest level or comparison.
        "max_batch_size": max(
            [*levels, args.growth_concurrency, args.linear_level, args.group_level]
        ),
        "name": "defender-cached",
    }
    if args.num_threads > 0:
        overrides["num_threads"] = args.num_threads
    load_start = time.perf_counter()
    try:
        cached = make_llm_policy(args.model, **overrides)
    except (ValueError, OSError, ImportError) as exc:
        print(f"error: cannot load {args.model!r}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(cached.backend, HFBackend):
        print(
            "error: the benchmark measures the transformers backend (hf:/default)", file=sys.stderr
        )
        return 1
    load_seconds = time.perf_counter() - load_start

    def same_weights(name: str, **backend_options: Any) -> LLMPolicy:
        """The cached policy's weights behind another backend setting."""
        backend = HFBackend.from_model(
            cached.backend.model,
            cached.backend.tokenizer,
            model_name=cached.backend.model_name,
            max_batch_size=overrides["max_batch_size"],
            **backend_options,
        )
        backend.num_threads = cached.backend.num_threads
        return LLMPolicy(backend, name=name, temperature=0.0, max_new_tokens=args.max_new_tokens)

    # No cache: the only difference between the two policies.
    modes = {"cached": cached, "uncached": same_weights("defender-uncached", kv_cache=False)}

    identical = True
    level_results = []
    cached_answers: dict[int, list[list[str]]] = {}
    for concurrency in levels:
        games = games_at(concurrency, args)
        entry: dict[str, Any] = {"concurrency": concurrency, "games": games}
        answers = {}
        for mode, policy in modes.items():
            entry[mode], answers[mode] = play(
                policy, concurrency, games, args.turns, args, f"c{concurrency}"
            )
            _log(f"level {concurrency} {mode}: {json.dumps(entry[mode])}")
        cached_answers[concurrency] = answers["cached"]
        same = answers["cached"] == answers["uncached"]
        identical &= same
        entry["identical_greedy"] = same
        entry["cached_vs_uncached"] = paired.ratio(
            entry["cached"]["episodes_per_min"], entry["uncached"]["episodes_per_min"]
        )
        entry["prefill_seconds_ratio"] = paired.ratio(
            entry["uncached"]["prefill_seconds_per_episode"],
            entry["cached"]["prefill_seconds_per_episode"],
        )
        level_results.append(entry)

    growth: dict[str, Any] = {"turns": growth_turns, "concurrency": args.growth_concurrency}
    for mode, policy in modes.items():
        seconds, prefill = [], []
        for turns in growth_turns:
            reuse = next(
                (
                    e[mode]
                    for e in level_results
                    if turns == args.turns and e["concurrency"] == args.growth_concurrency
                ),
                None,
            )
            if reuse is None:
                reuse, _ = play(
                    policy,
                    args.growth_concurrency,
                    games_at(args.growth_concurrency, args),
                    turns,
                    args,
                    "g",
                )
                _log(f"growth {turns} turns {mode}: {json.dumps(reuse)}")
            seconds.append(reuse["seconds_per_episode"])
            prefill.append(reuse["prefill_tokens_per_episode"])
        growth[mode] = {
            "seconds_per_episode": seconds,
            "prefill_tokens_per_episode": prefill,
            "exponent_seconds": _fit_exponent(growth_turns, seconds),
            "exponent_prefill_tokens": _fit_exponent(growth_turns, prefill),
        }

    linear: dict[str, Any] | None = None
    if args.linear_level > 0:
        linear = compare_paths(
            {
                "packed": cached,
                "f_linear": same_weights("defender-cached-plain-linear", packed_linear=False),
            },
            args.linear_level,
            args.linear_pairs,
            args,
            reference=cached_answers.get(args.linear_level),
        )
    shared: dict[str, Any] | None = None
    if args.group_level > 0:
        shared = compare_paths(
            {
                "shared": cached,
                "unshared": same_weights("defender-unshared", kv_cache_share_prefixes=False),
            },
            args.group_level,
            args.group_pairs,
            args,
            reference=None,
            group_size=args.group_size,
        )
        shared["group_size"] = args.group_size

    by_level = {e["concurrency"]: e for e in level_results}
    one, top = by_level.get(1), by_level.get(max(levels))
    import torch
    from tomgym.agents.llm import decode_kernel

    report = {
        "machine": machine,
        "config": {
            "model": args.model,
            "backend": cached.backend.describe(),
            "turns": args.turns,
            "max_new_tokens": args.max_new_tokens,
            "max_retries": args.max_retries,
            "temperature": 0.0,
            "torch_threads": torch.get_num_threads(),
            # Whether decode attention ran in the compiled kernel (fp32 on CPU, built on its
            # first use; TOMGYM_DECODE_KERNEL=0 or a failed build: False).
            "decode_kernel": decode_kernel.built(),
            "load_seconds": round(load_seconds, 2),
        },
        "levels": level_results,
        "cached_vs_uncached": {
            str(e["concurrency"]): e["cached_vs_uncached"] for e in level_results
        },
        f"speedup_{max(levels)}_vs_1_cached": paired.ratio(
            top["cached"]["episodes_per_min"], one["cached"]["episodes_per_min"]
        )
        if one and top
        else None,
        "growth": growth,
        "identical_greedy": identical,
        "packed_linear": linear,
        "shared_prefixes": shared,
        # ru_maxrss is in KiB on Linux.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cache": cached.backend.cache_stats(),
    }
    text = json.dumps(report)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(report, indent=2) + "\n")
    print(text)
    cached.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
