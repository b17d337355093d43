"""The TOM-SB behaviour matrix: scripted defenders against scripted attackers, through the env.

Every episode runs through the PettingZoo env (`envs.tomsb.env.raw_env`) with the scripted
`Policy` adapters of `agents.tomsb_policies`, exactly as a training or evaluation run plays them
(the env is the one episode loop; it is also about as fast as the pure rules here, since the
scripted players dominate the time).

Contract:
- `play_scripted_episode(scenario, defender, attacker, seed, episode=0)` plays game
  `"{scenario_id}#{episode}"` with env seed `seed + episode` and policies seeded with `seed`;
  a scripted answer the env rejects raises RuntimeError (scripted players must speak the
  protocol).
- `run_matrix(scenarios, defenders, attackers, episodes_per_scenario, seed)` plays every
  defender x attacker pair over every scenario, `episodes_per_scenario` episodes each, and
  returns `{defender: {attacker: [EpisodeResult]}}`; `outcome_rates` summarises a list.
- Deterministic: the same arguments give the same results in every process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, raw_env
from tomgym.envs.tomsb.game import DEFAULT_MAX_ATTACKER_TURNS, OUTCOMES
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS
from tomgym.envs.tomsb.universe import Scenario


@dataclass(frozen=True)
class EpisodeResult:
    """One scripted episode: who played, the outcome and the number of attacker turns."""

    scenario_id: str
    prior_level: int
    defender: str
    attacker: str
    outcome: str
    attacker_turns: int


def _play(
    env: raw_env,
    policies: dict[str, BasePolicy],
    scenario: Scenario,
    attacker: str,
    *,
    game_id: str,
    env_seed: int,
    reveal_prior: bool,
) -> dict[str, Any]:
    """One game through the env; the final infos. Forgets the game in both policies after."""
    for policy in policies.values():
        policy.reset(game_id)
    env.reset(
        seed=env_seed,
        options={"scenario": scenario, "attacker": attacker, "reveal_prior": reveal_prior},
    )
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        env.step(policies[agent].act_batch([Turn(game_id, agent, obs)])[0])
    for policy in policies.values():
        policy.forget(game_id)
    summary = env.summary()
    for agent in (ATTACKER, DEFENDER):
        info = env.infos.get(agent) or {}
        if info.get("retries", 0) or info.get("fallbacks", 0):
            name = policies[agent].name
            raise RuntimeError(
                f"scripted {agent} {name!r} gave an answer the env rejected in game {game_id!r}: "
                f"{info.get('last_parse', {}).get('error')}"
            )
    return summary


def _result(scenario: Scenario, defender: str, attacker: str, summary: dict) -> EpisodeResult:
    return EpisodeResult(
        scenario_id=scenario.scenario_id,
        prior_level=scenario.prior_level,
        defender=defender,
        attacker=attacker,
        outcome=str(summary["outcome"]),
        attacker_turns=int(summary["turns"]),
    )


def play_scripted_episode(
    scenario: Scenario,
    defender: str,
    attacker: str,
    seed: int = 0,
    *,
    episode: int = 0,
    reveal_prior: bool = False,
    max_attacker_turns: int = DEFAULT_MAX_ATTACKER_TURNS,
) -> EpisodeResult:
    """One scripted defender against one scripted attacker on `scenario` (see module doc)."""
    env = raw_env(scenarios=[scenario], max_attacker_turns=max_attacker_turns)
    policies = {
        ATTACKER: make_scripted_tomsb_policy(attacker, seed),
        DEFENDER: make_scripted_tomsb_policy(defender, seed),
    }
    summary = _play(
        env,
        policies,
        scenario,
        attacker,
        game_id=f"{scenario.scenario_id}#{episode}",
        env_seed=seed + episode,
        reveal_prior=reveal_prior,
    )
    return _result(scenario, defender, attacker, summary)


def run_matrix(
    scenarios: Sequence[Scenario],
    defenders: Sequence[str] = tuple(DEFENDER_STRATEGIES),
    attackers: Sequence[str] = ATTACKER_VARIANTS,
    *,
    episodes_per_scenario: int = 1,
    seed: int = 0,
    reveal_prior: bool = False,
    max_attacker_turns: int = DEFAULT_MAX_ATTACKER_TURNS,
    prompt_variant: str = "default",
) -> dict[str, dict[str, list[EpisodeResult]]]:
    """Every defender x attacker over `scenarios`: {defender: {attacker: [EpisodeResult]}}.

    `prompt_variant` changes only what a model would read; scripted players play every one alike.
    """
    env = raw_env(
        scenarios=list(scenarios),
        max_attacker_turns=max_attacker_turns,
        prompt_variant=prompt_variant,
    )
    table: dict[str, dict[str, list[EpisodeResult]]] = {}
    for d in defenders:
        for a in attackers:
            policies = {
                ATTACKER: make_scripted_tomsb_policy(a, seed),
                DEFENDER: make_scripted_tomsb_policy(d, seed),
            }
            results = table.setdefault(d, {}).setdefault(a, [])
            for scenario in scenarios:
                for k in range(episodes_per_scenario):
                    summary = _play(
                        env,
                        policies,
                        scenario,
                        a,
                        game_id=f"{scenario.scenario_id}#{k}",
                        env_seed=seed + k,
                        reveal_prior=reveal_prior,
                    )
                    results.append(_result(scenario, d, a, summary))
    return table


def outcome_rates(results: Iterable[EpisodeResult]) -> dict[str, float]:
    """Share of each outcome (plus `n`) over `results`."""
    results = list(results)
    n = len(results)
    counts: dict[str, float] = dict.fromkeys(OUTCOMES, 0.0)
    for r in results:
        counts[r.outcome] += 1.0
    rates = {o: (c / n if n else 0.0) for o, c in counts.items()}
    rates["n"] = float(n)
    return rates
