"""K sweep of the Decrypto embedding baseline (the paper's appendix E experiment).

For each K, an `EmbeddingDecryptoPolicy(k=K)` team (encoder + decoder, one policy object) plays
an embedding-baseline interceptor through the real AEC env (`envs.decrypto_v0.env()`), for
`--seeds` seeds x `--games` games. Games of the same (seed, index) use the same env seed for every
K, so keywords and codes are paired across K. Reported per K: mean +- std over seeds (each seed's
mean over its games; std with ddof=1, 0 for one seed) of rounds played, miscommunications,
interceptions and the team win rate. Expected direction (paper): larger K -> vaguer hints -> more
miscommunications and shorter games.

Run: `python bench/k_sweep.py [--ks 1 4 16 64 256] [--seeds 3] [--games 32] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tomgym.agents.base import Turn
from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy
from tomgym.agents.vectors import DEFAULT_VECTORS, VECTOR_NAMES
from tomgym.envs import decrypto_v0
from tomgym.envs.seeding import derive_seed

DEFAULT_KS = (1, 4, 16, 64, 256)
METRICS = ("rounds", "miscommunications", "interceptions", "team_win")


def play_game(
    env: Any, policies: dict[str, Any], game_id: str, env_seed: int
) -> dict[str, dict[str, Any]]:
    """One AEC game; returns every agent's final info (the env's end-of-game summary)."""
    for policy in set(policies.values()):
        policy.reset(game_id)
    env.reset(seed=env_seed)
    finals: dict[str, dict[str, Any]] = {}
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            finals[agent] = dict(info)
            env.step(None)
            continue
        turn = Turn(game_id, agent, obs, side_question=bool(obs["side_question"]))
        env.step(policies[agent].act_batch([turn])[0])
    if set(finals) != set(policies):
        raise RuntimeError(f"game {game_id} ended without final infos for every agent")
    for policy in set(policies.values()):
        policy.forget(game_id)
    return finals


def run_k_sweep(
    ks: Sequence[int] = DEFAULT_KS,
    seeds: int = 3,
    games: int = 32,
    encoder_vectors: str = DEFAULT_VECTORS,
    decoder_vectors: str = DEFAULT_VECTORS,
    interceptor_vectors: str = DEFAULT_VECTORS,
) -> list[dict[str, Any]]:
    """Play the sweep; one row per K with per-seed means and their mean/std.

    Each role's baseline works in its own vector space (`agents.vectors` names); with the same
    name for encoder and decoder one policy object plays both, as one team would.
    """
    env = decrypto_v0.env()
    rows: list[dict[str, Any]] = []
    for k in ks:
        per_seed: dict[str, list[float]] = {m: [] for m in METRICS}
        fallbacks = retries = 0
        for seed in range(seeds):
            encoder = EmbeddingDecryptoPolicy(k=k, seed=seed, vectors=encoder_vectors)
            decoder = (
                encoder
                if decoder_vectors == encoder_vectors
                else EmbeddingDecryptoPolicy(k=k, seed=seed, vectors=decoder_vectors)
            )
            # K is unused by the interceptor.
            eve = EmbeddingDecryptoPolicy(seed=10_000 + seed, vectors=interceptor_vectors)
            policies = {"encoder_0": encoder, "decoder_0": decoder, "interceptor_0": eve}
            totals = dict.fromkeys(METRICS, 0.0)
            for g in range(games):
                finals = play_game(
                    env, policies, f"k{k}-s{seed}-g{g}", derive_seed("k_sweep", seed, g) % 2**31
                )
                info = finals["encoder_0"]
                totals["rounds"] += info["rounds"]
                totals["miscommunications"] += info["miscommunications"]
                totals["interceptions"] += info["interceptions"]
                totals["team_win"] += float(info["team_won"])
                fallbacks += sum(int(f["fallbacks"]) for f in finals.values())
                retries += sum(int(f["retries"]) for f in finals.values())
            for m in METRICS:
                per_seed[m].append(totals[m] / games)
        row: dict[str, Any] = {
            "k": k,
            "vectors": {
                "encoder": encoder_vectors,
                "decoder": decoder_vectors,
                "interceptor": interceptor_vectors,
            },
            "seeds": seeds,
            "games_per_seed": games,
            "fallbacks": fallbacks,
            "retries": retries,
        }
        for m in METRICS:
            values = np.asarray(per_seed[m])
            row[m] = {
                "mean": float(values.mean()),
                "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                "per_seed": [float(v) for v in values],
            }
        rows.append(row)
    env.close()
    return rows


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| K | rounds | miscommunications | interceptions | team win rate |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [f"{row[m]['mean']:.2f} ± {row[m]['std']:.2f}" for m in METRICS]
        lines.append(f"| {row['k']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=list(DEFAULT_KS), help="K values")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (policy seeds 0..n-1)")
    parser.add_argument("--games", type=int, default=32, help="games per seed")
    for role in ("encoder", "decoder", "interceptor"):
        parser.add_argument(
            f"--{role}-vectors",
            choices=VECTOR_NAMES,
            default=DEFAULT_VECTORS,
            help=f"vector space of the {role} baseline (default: %(default)s)",
        )
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.games < 1 or any(k < 1 for k in args.ks):
        parser.error("--seeds, --games and every K must be >= 1")
    start = time.perf_counter()
    rows = run_k_sweep(
        args.ks,
        args.seeds,
        args.games,
        encoder_vectors=args.encoder_vectors,
        decoder_vectors=args.decoder_vectors,
        interceptor_vectors=args.interceptor_vectors,
    )
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps({"rows": rows, "seconds": round(elapsed, 1)}))  # one line: the last parses
    else:
        print(markdown_table(rows))
        print(f"\n{args.seeds} seeds x {args.games} games per K, {elapsed:.1f} s")


if __name__ == "__main__":
    main()
