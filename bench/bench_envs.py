"""Environment throughput benchmark (JSON on stdout). Not a test: speed targets live here.

Measures complete games per second on one core:
- `decrypto_rules`: the pure rules engine with random valid moves;
- `decrypto_aec_blind`: the AEC env with random valid text answers, agents not reading observations;
- `decrypto_aec_observed`: the same, but every agent renders its observation (prompt text) first;
- `decrypto_parallel`: the native Parallel env with random valid answers;
- `tomsb_scripted`: TOM-SB episodes, scripted ToM-heuristic defender vs scripted base attacker.
Each figure is the median over `--repeats` timed batches.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
from tomgym.envs import decrypto_v0
from tomgym.envs.decrypto import game as rules

from bench.machine import describe_machine

CODES = [f'ANSWER: {{"guess": "{a}-{b}-{c}"}}' for a, b, c in rules.ALL_CODES]
HINTS = [
    'ANSWER: {"hints": ["sun", "boat", "piano"]}',
    'ANSWER: {"hints": ["red", "tree", "salt"]}',
]


def _timed(fn: Callable[[int], int], games: int, repeats: int) -> float:
    rates = []
    for r in range(repeats):
        start = time.perf_counter()
        played = fn(r * games)
        rates.append(played / (time.perf_counter() - start))
    return statistics.median(rates)


def rules_games(offset: int, games: int) -> int:
    rng = np.random.default_rng(offset)
    words = rules.load_keyword_list()
    for _ in range(games):
        game = rules.DecryptoGame(rules.sample_keywords(rng, words), rules.sample_codes(rng, 8))
        while not game.finished:
            game.give_hints(("a", "b", "c"))
            game.resolve_guesses(
                rules.ALL_CODES[rng.integers(24)], rules.ALL_CODES[rng.integers(24)]
            )
    return games


def aec_games(offset: int, games: int, observe: bool) -> int:
    env = decrypto_v0.raw_env()
    rng = np.random.default_rng(offset)
    for i in range(games):
        env.reset(seed=offset + i)
        while not all(env.terminations.values()):
            agent = env.agent_selection
            if observe:
                env.observe(agent)
            request = env.match.pending[0]
            env.step(HINTS[i % 2] if request.kind == "hints" else CODES[rng.integers(24)])
    return games


def parallel_games(offset: int, games: int) -> int:
    env = decrypto_v0.parallel_env()
    rng = np.random.default_rng(offset)
    for i in range(games):
        env.reset(seed=offset + i)
        while env.agents:
            acting = env.acting_agents()
            env.step({a: HINTS[0] if a == "encoder_0" else CODES[rng.integers(24)] for a in acting})
    return games


def tomsb_episodes(offset: int, games: int) -> int:
    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
    from tomgym.training.runner import GameSpec, play_games

    policies = {
        "attacker_0": make_scripted_tomsb_policy("base", seed=offset),
        "defender_0": make_scripted_tomsb_policy("tom_heuristic", seed=offset),
    }
    specs = [GameSpec(f"b{offset + i}", offset + i, {"attacker": "base"}) for i in range(games)]
    play_games("tomgym/tomsb-v0", specs, policies, concurrency=16, record_prompts=False)
    return games


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    g, r = args.games, args.repeats
    result = {
        "machine": describe_machine(),
        "games_per_batch": g,
        "repeats": r,
        "decrypto_rules_games_per_s": _timed(lambda o: rules_games(o, g), g, r),
        "decrypto_aec_blind_games_per_s": _timed(lambda o: aec_games(o, g, False), g, r),
        "decrypto_aec_observed_games_per_s": _timed(
            lambda o: aec_games(o, g // 5, True), g // 5, r
        ),
        "decrypto_parallel_games_per_s": _timed(lambda o: parallel_games(o, g), g, r),
        "tomsb_scripted_episodes_per_s": _timed(lambda o: tomsb_episodes(o, g // 5), g // 5, r),
    }
    # One line, so that the last line of stdout parses as the result.
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
