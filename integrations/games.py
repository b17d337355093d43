"""What the integrations share, whatever library hosts the game: seats, policies, records, rewards.

Contract:
- `GAMES` names each game by its short name (`"tomsb"`, `"decrypto"`): its PettingZoo env id,
  its seats (the role names another library addresses, in tomgym's turn-order-independent
  declaration order) and the tomgym agent id behind each seat.
- `EpisodeLog` drives nothing: the host library steps the tomgym AEC env itself and calls
  `log.answered(...)` after each `env.step`, so the env's own rules decide turns and outcomes.
  `log.record(...)` is then the same episode record the batched runner writes
  (`tomgym.rewards.episode`), so every reward, metric and report reads it unchanged.
- `seat_reward(record, game, seat, spec)` scores one seat with `tomgym.rewards.RewardComposer` (the
  functions evaluation and training use); a seat without weights gets the env's own reward.
- `make_seat_policy(spec, seed)` builds a tomgym policy from a policy-spec string ("random",
  "embedding", "scripted:base", "openai:<model>", ...), with the grammar of
  `tomgym.training.policy_specs.make_policy` (the only place that grammar is imported from).
- Values in records go through the runner's `to_jsonable`, so both kinds of record have one form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import tomgym.envs  # noqa: F401 - registers the PettingZoo ids
from tomgym.agents.base import Policy
from tomgym.rewards import RewardComposer
from tomgym.rewards.episode import EpisodeRecord, new_record

# The runner's JSON conversion, so our records and its records can never differ in form.
from tomgym.training.runner import to_jsonable


@dataclass(frozen=True)
class Game:
    """One tomgym game as other libraries see it."""

    name: str
    env_id: str
    seats: tuple[str, ...]
    agent_of_seat: Mapping[str, str]

    def seat_of(self, agent: str) -> str:
        for seat, seat_agent in self.agent_of_seat.items():
            if seat_agent == agent:
                return seat
        raise KeyError(f"{self.name} has no seat for agent {agent!r}")


TOMSB = Game(
    name="tomsb",
    env_id="tomgym/tomsb-v0",
    seats=("attacker", "defender"),
    agent_of_seat={"attacker": "attacker_0", "defender": "defender_0"},
)
DECRYPTO = Game(
    name="decrypto",
    env_id="tomgym/decrypto-v0",
    seats=("encoder", "decoder", "interceptor"),
    agent_of_seat={"encoder": "encoder_0", "decoder": "decoder_0", "interceptor": "interceptor_0"},
)
GAMES: dict[str, Game] = {game.name: game for game in (TOMSB, DECRYPTO)}


@dataclass(frozen=True)
class SeatReward:
    """How one seat is scored: `RewardComposer(weights, gate)`; empty weights = env reward."""

    weights: Mapping[str, float] = field(default_factory=dict)
    gate: str | None = None


# The defaults are the papers' training signals, as in training/configs: ADA-Fooling for the
# TOM-SB defender, the Decrypto encoder's trainer weights; the other seats keep the game's own
# win/loss reward.
DEFAULT_REWARDS: dict[str, dict[str, SeatReward]] = {
    "tomsb": {"defender": SeatReward({"fooling": 1.0}, gate="format")},
    "decrypto": {
        "encoder": SeatReward(
            {"decrypto_win": 1.0, "decrypto_rounds": 0.5, "decrypto_interception": 0.5},
            gate="format",
        )
    },
}


def seat_reward(
    record: Mapping[str, Any], game: Game, seat: str, spec: SeatReward | None
) -> tuple[float, dict[str, float]]:
    """`(total, components)` of `seat` in a finished episode record."""
    agent = game.agent_of_seat[seat]
    if spec is None or not spec.weights:
        value = float(record["rewards"].get(agent, 0.0))
        return value, {"env_reward": value}
    composer = RewardComposer(dict(spec.weights), gate=spec.gate, agent=agent)
    return composer(record)


def make_seat_policy(spec: str, *, seed: int) -> Policy:
    """The tomgym policy a policy spec names (see the module docstring)."""
    from tomgym.training.policy_specs import make_policy

    return make_policy(spec, seed=seed)


class EpisodeLog:
    """Turn entries and returns of one episode, in the runner's record format."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.turns: list[dict[str, Any]] = []
        self.returns = {agent: 0.0 for agent in env.possible_agents}

    def answered(self, agent: str, observation: Mapping[str, Any], answer: str) -> None:
        """Log the answer `agent` gave to `observation`; call right after `env.step(answer)`."""
        for rewarded, reward in self.env.rewards.items():
            self.returns[rewarded] = self.returns.get(rewarded, 0.0) + float(reward)
        parse = self.env.infos.get(agent, {}).get("last_parse", {}) or {}
        self.turns.append(
            {
                "agent": agent,
                "message": observation.get("message", ""),
                "raw": answer,
                "parsed": to_jsonable(parse.get("parsed")),
                "valid": bool(parse.get("valid", True)),
                "error": parse.get("error"),
                "retry": int(observation.get("retry", 0)),
                "side_question": bool(observation.get("side_question", 0)),
            }
        )

    @property
    def done(self) -> bool:
        env = self.env
        return not env.agents or all(
            env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents
        )

    def record(
        self,
        *,
        game_id: str,
        env_id: str,
        env_config: Mapping[str, Any],
        seed: int,
        options: Mapping[str, Any],
        policies: Mapping[str, Mapping[str, Any]],
    ) -> EpisodeRecord:
        infos = {
            agent: to_jsonable(self.env.infos.get(agent, {})) for agent in self.env.possible_agents
        }
        return new_record(
            game_id=game_id,
            env_id=env_id,
            env_config=to_jsonable(env_config),
            seed=seed,
            options=to_jsonable(options),
            policies=policies,
            turns=self.turns,
            infos=infos,
            rewards=self.returns,
        )
