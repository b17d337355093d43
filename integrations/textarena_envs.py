"""TOM-SB and Decrypto as TextArena (>= 0.7.4) environments, registered under tomgym ids.

## Description
`TomSBTextArenaEnv` and `DecryptoTextArenaEnv` are `textarena.Env` subclasses over the tomgym
PettingZoo AEC envs: the tomgym env's own rules decide who moves, parse answers (re-asking with
the reason, then falling back) and end the game. Importing this module registers

    tomgym/tomsb-v0       tomgym/tomsb-v0-raw
    tomgym/decrypto-v0    tomgym/decrypto-v0-raw

in TextArena's registry (`textarena.make(env_id, **env_config)`; keyword arguments go to the
tomgym env's constructor, plus `options` for its reset options). The plain ids return string
observations; the `-raw` ids TextArena's message lists.

## Players (roles)
TOM-SB: 2 players, 0 = attacker, 1 = defender. Decrypto: 3 players, 0 = encoder,
1 = decoder, 2 = interceptor. `reset(num_players=...)` checks the count.

## Observations
`get_observation()` returns `(player_id, observation)` for the player to move. Each tomgym prompt
is complete and standalone (rules, what the role may know, the dialogue or round history so
far, the question), so a player's observation is exactly one `PROMPT` message from the game;
the plain ids give its text. `pending_observation()` returns the tomgym observation dict
(for a tomgym policy playing a seat: `policy.act_batch([Turn(game_id, agent, obs)])`).

## Actions
`step(action)`: the player's reply text; it returns `(done, info)` as TextArena does.

## Rewards
`close()` returns `(rewards, game_info)`: `rewards` maps player id to the tomgym env's own game
reward (TOM-SB: defender 1 if fooled, attacker 1 if it extracted or detected, "baited" pays
neither; Decrypto: +1 winners, -1 losers). `game_info[player]` holds the `outcome`, the reward of
`tomgym.rewards` for that seat (`tomgym_reward`, the integrations' default weights: ADA-Fooling
for the defender, the trainer's weights for the encoder, else the game reward) and the episode
record in the runner's format (`tomgym_record`), so every tomgym metric and report reads it.

## Episode end
When the tomgym env terminates every agent; `step` then returns `done=True`.

## Seeding
`reset(num_players, seed)` passes `seed` to the tomgym env (its own generators: scenario,
keywords and codes); TextArena's process-global `random` is not touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pettingzoo
import textarena as ta
from tomgym.integrations.games import (
    DECRYPTO,
    DEFAULT_REWARDS,
    TOMSB,
    EpisodeLog,
    Game,
    seat_reward,
)
from tomgym.rewards.episode import EpisodeRecord
from tomgym.training.runner import GameSpec

RAW_SUFFIX = "-raw"


class TomgymTextArenaEnv(ta.Env):
    """A tomgym game as a TextArena env; the module docstring is its documentation."""

    GAME: ClassVar[Game]

    def __init__(self, options: Mapping[str, Any] | None = None, **env_config: Any) -> None:
        self.env_config = dict(env_config)
        self.options = dict(options or {})
        self.env: Any = None
        self.state: ta.State | None = None
        self._log: EpisodeLog | None = None
        self._observation: Mapping[str, Any] = {}

    @property
    def players(self) -> tuple[str, ...]:
        """tomgym agent id of each TextArena player id."""
        return tuple(self.GAME.agent_of_seat[seat] for seat in self.GAME.seats)

    def reset(self, num_players: int, seed: int | None = None) -> None:
        if num_players != len(self.GAME.seats):
            raise ValueError(
                f"{self.GAME.name} is played by {len(self.GAME.seats)} players "
                f"({', '.join(self.GAME.seats)}), got num_players={num_players}"
            )
        self.env = pettingzoo.make("aec", self.GAME.env_id, **self.env_config)
        self.env.reset(seed=seed, options=dict(self.options) or None)
        game = GameSpec(
            f"textarena/{self.GAME.name}/{seed}", -1 if seed is None else seed, self.options
        )
        self._log = EpisodeLog(self.env, game, env_id=self.GAME.env_id, env_config=self.env_config)
        # seed=None: the tomgym env owns its randomness; ta.State would reseed global `random`.
        self.state = ta.State(num_players=num_players, seed=None)
        self.state.standard_resets(
            game_state={"game": self.GAME.name},
            role_mapping=dict(enumerate(self.GAME.seats)),
        )
        self._show_pending()

    def pending_observation(self) -> Mapping[str, Any]:
        """The tomgym observation dict of the player to move."""
        return self._observation

    def step(self, action: str) -> tuple[bool, ta.Info]:
        state, log = self._require_reset()
        if state.done:
            return True, {}
        agent = self.env.agent_selection
        observation = self._observation
        self.env.step(action)
        log.answered(agent, observation, action)
        state.turn += 1
        state.game_info[state.current_player_id]["turn_count"] += 1
        if log.done:
            self._finish()
        else:
            self._show_pending()
        return state.done, {}

    def get_observation(self) -> tuple[int, list[ta.Message]]:
        state, _ = self._require_reset()
        return state.current_player_id, state.get_current_player_observation()

    def close(self) -> tuple[dict[int, float] | None, dict[int, dict[str, Any]]]:
        state, _ = self._require_reset()
        return state.rewards, state.game_info

    def record(self) -> EpisodeRecord:
        """The finished (or running) episode as a tomgym episode record."""
        _, log = self._require_reset()
        return log.record({agent: {"name": "textarena"} for agent in self.players})

    def _require_reset(self) -> tuple[ta.State, EpisodeLog]:
        if self.state is None or self._log is None:
            raise RuntimeError("call reset(num_players, seed) first")
        return self.state, self._log

    def _show_pending(self) -> None:
        state, _ = self._require_reset()
        agent = self.env.agent_selection
        player = self.players.index(agent)
        self._observation = self.env.observe(agent)
        state.current_player_id = player
        # The prompt is standalone, so an unread older one is superseded, not kept.
        state.observations[player] = []
        state.add_observation(
            message=str(self._observation["prompt"]),
            observation_type=ta.ObservationType.PROMPT,
            to_id=player,
        )

    def _finish(self) -> None:
        state, _ = self._require_reset()
        record = self.record()
        defaults = DEFAULT_REWARDS.get(self.GAME.name, {})
        state.rewards = {}
        for player, seat in enumerate(self.GAME.seats):
            agent = self.GAME.agent_of_seat[seat]
            state.rewards[player] = float(record["rewards"].get(agent, 0.0))
            total, _ = seat_reward(record, self.GAME, seat, defaults.get(seat))
            state.game_info[player].update(
                reason=str(record["outcome"]),
                outcome=record["outcome"],
                tomgym_reward=total,
                tomgym_record=record,
            )
        state.done = True


class TomSBTextArenaEnv(TomgymTextArenaEnv):
    GAME: ClassVar[Game] = TOMSB


class DecryptoTextArenaEnv(TomgymTextArenaEnv):
    GAME: ClassVar[Game] = DECRYPTO


class PromptTextObservationWrapper(ta.ObservationWrapper):
    """The player's observation as the text of its latest prompt (each prompt is standalone)."""

    def observation(self, player_id: int, observation: list[ta.Message] | None) -> str:
        return str(observation[-1][1]) if observation else ""


TEXTARENA_IDS: dict[str, type[TomgymTextArenaEnv]] = {
    "tomgym/tomsb-v0": TomSBTextArenaEnv,
    "tomgym/decrypto-v0": DecryptoTextArenaEnv,
}


def register_textarena_envs() -> None:
    """Register every tomgym id in TextArena's registry (idempotent)."""
    from textarena.envs.registration import ENV_REGISTRY, register_with_versions

    for env_id, env_class in TEXTARENA_IDS.items():
        if env_id not in ENV_REGISTRY:
            register_with_versions(
                id=env_id,
                entry_point=env_class,
                wrappers={"default": [PromptTextObservationWrapper]},
            )


register_textarena_envs()

__all__ = [
    "RAW_SUFFIX",
    "TEXTARENA_IDS",
    "DecryptoTextArenaEnv",
    "PromptTextObservationWrapper",
    "TomSBTextArenaEnv",
    "TomgymTextArenaEnv",
    "register_textarena_envs",
]
