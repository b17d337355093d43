"""What the integrations share, whatever library hosts the game: seats, policies, records, rewards.

Contract:
- `GAMES` names each game by its short name (`"tomsb"`, `"decrypto"`): its PettingZoo env id,
  its seats (the role names another library addresses, in tomgym's turn-order-independent
  declaration order) and the tomgym agent id behind each seat; derived from the command line's
  game table (`tomgym.training.eval.plans.GAMES`), which owns the ids and agents.
- `EpisodeLog` (the batched runner's, `tomgym.training.runner.EpisodeLog`) drives nothing: the
  host library steps the tomgym AEC env itself and calls `log.answered(...)` after each
  `env.step`, so the env's own rules decide turns and outcomes. `log.record(...)` is then the
  same episode record the runner writes (`tomgym.rewards.episode`), so every reward, metric and
  report reads it unchanged.
- `seat_reward(record, game, seat, spec)` scores one seat with `tomgym.rewards.RewardComposer` (the
  functions evaluation and training use); a seat without weights gets the env's own reward.
- `make_seat_policy(spec, seed)` builds a tomgym policy from a policy-spec string ("random",
  "embedding", "scripted:base", "openai:<model>", ...), with the grammar of
  `tomgym.training.policy_specs.make_policy` (the only place that grammar is imported from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import tomgym.envs  # noqa: F401 - registers the PettingZoo ids
from tomgym.agents.base import Policy
from tomgym.rewards import RewardComposer
from tomgym.training.eval.plans import GAMES as COMMAND_LINE_GAMES
from tomgym.training.eval.plans import GameInfo

# The runner's episode log, so our records and its records can never differ in form.
from tomgym.training.runner import EpisodeLog

__all__ = [
    "DECRYPTO",
    "DEFAULT_REWARDS",
    "GAMES",
    "TOMSB",
    "EpisodeLog",
    "Game",
    "SeatReward",
    "make_seat_policy",
    "seat_reward",
]


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


def _game(info: GameInfo) -> Game:
    # A seat is the role an agent id names, without its index ("defender_0" -> "defender").
    seats = {agent.rsplit("_", 1)[0]: agent for agent in info.agents}
    return Game(name=info.name, env_id=info.env_id, seats=tuple(seats), agent_of_seat=seats)


GAMES: dict[str, Game] = {name: _game(info) for name, info in COMMAND_LINE_GAMES.items()}
TOMSB = GAMES["tomsb"]
DECRYPTO = GAMES["decrypto"]


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
