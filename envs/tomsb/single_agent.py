"""Single-agent Gymnasium view of TOM-SB: the defender learns, the attacker is part of the env.

## Description
`TomSBDefenderEnv` runs the TOM-SB AEC environment (`envs.tomsb.env.raw_env`) and plays the
attacker itself, so each `step` takes one defender answer and returns the defender's next
observation (after the attacker has answered), or the final one.

## Attacker
`attacker` is either
- a scripted variant name, "base", "cross_examiner", "deception_aware" or "bluffing", built per
  episode with `envs.tomsb.attackers.make_attacker(variant, scenario_view, seed)` from the
  attacker's own observation (the attacker view of `envs.tomsb.protocol`); or
- a policy object with `act_batch(turns) -> list[str]` (the `agents.base.Policy` protocol; each
  turn is an `envs.turn.Turn` with `game_id`, `agent`, `observation`, `side_question`, `metadata`
  and a `prompt` property, the same attributes as `agents.base.Turn`, which `envs` may not
  import); its `reset(game_id)` is called at each reset when present, and its
  `forget(game_id)` when the episode's game is done with (at the next reset, or `close`); or
- an object with `act(observation: dict) -> str`, or a plain callable
  `attacker(observation: dict) -> str`, given the attacker's observation dict.
The attacker's variant name for prompts and infos is `attacker_variant` (default: the scripted
name, else "base").

## Action Space
`FreeText`: the defender's raw JSON answer (see `envs.tomsb.parsing`). Invalid answers are
re-asked by the environment (the returned observation has `retry` > 0 and reward 0).

## Observation Space
The defender's `Dict` observation of the AEC environment.

## Rewards
1.0 at the end if the outcome is "fooled", else 0.0 (training rewards live in `rewards/`).

## Episode End
`terminated` when the game ends (attacker success or detection signal, or the turn limit);
`truncated` is always False. The final `info` holds the AEC env's end-of-episode fields.

## Arguments
`TomSBDefenderEnv(attacker="base", render_mode=None, attacker_variant=None, **config)`, where
`config` goes to `raw_env` (`max_attacker_turns`, `max_retries`, `prompt_variant`,
`benchmark_seed`, `split`, `reveal_prior`, `scenarios`). `reset(seed, options)` takes the AEC
env's options.

## Version History
- v0: initial release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, raw_env
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS, pending_reply, view_from_observation
from tomgym.envs.turn import Turn


class TomSBDefenderEnv(gymnasium.Env):
    """The defender's view of TOM-SB with a built-in attacker (see module doc)."""

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        attacker: str | Any = "base",
        render_mode: str | None = None,
        attacker_variant: str | None = None,
        **config: Any,
    ) -> None:
        if isinstance(attacker, str):
            if attacker not in ATTACKER_VARIANTS:
                raise ValueError(
                    f"attacker must be one of {list(ATTACKER_VARIANTS)} or a policy, "
                    f"got {attacker!r}"
                )
            variant = attacker_variant or attacker
        elif hasattr(attacker, "act_batch") or hasattr(attacker, "act") or callable(attacker):
            variant = attacker_variant or "base"
        else:
            raise TypeError(
                "attacker must be a variant name, an object with act_batch(turns) or "
                f"act(observation), or a callable; got {type(attacker).__name__}"
            )
        self.attacker = attacker
        self.render_mode = render_mode
        self._env = raw_env(render_mode=render_mode, attacker=variant, **config)
        self.observation_space = self._env.observation_space(DEFENDER)
        self.action_space = self._env.action_space(DEFENDER)
        self._scripted: Any = None
        self._game_id = ""
        self._episode = 0

    def _attacker_answer(self, observation: Mapping[str, Any]) -> str:
        if self._scripted is not None:
            # Scripted attackers track the dialogue themselves; they only need the new reply.
            return self._scripted.respond(pending_reply(observation))
        if hasattr(self.attacker, "act_batch"):
            turn = Turn(self._game_id, ATTACKER, observation)
            return self.attacker.act_batch([turn])[0]
        if hasattr(self.attacker, "act"):
            return self.attacker.act(observation)
        return self.attacker(observation)

    def _run_attacker(self) -> None:
        env = self._env
        while env.agents and env.agent_selection == ATTACKER and not env.terminations[ATTACKER]:
            answer = self._attacker_answer(env.observe(ATTACKER))
            env.step(answer)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        # Without a seed the episode is still a deterministic function of the last seed given.
        env_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        self._env.reset(seed=env_seed, options=options)
        self._forget_game()
        self._episode += 1
        self._game_id = f"tomsb-defender-{env_seed}-{self._episode}"
        self._scripted = None
        if isinstance(self.attacker, str):
            from tomgym.envs.tomsb.attackers import (
                make_attacker,  # lazy: only scripted runs need it
            )

            view = view_from_observation(self._env.observe(ATTACKER))
            self._scripted = make_attacker(self.attacker, view, env_seed)
        elif hasattr(self.attacker, "reset"):
            self.attacker.reset(self._game_id)
        self._run_attacker()
        return self._env.observe(DEFENDER), dict(self._env.infos.get(DEFENDER, {}))

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        env = self._env
        if not env.agents or env.terminations[DEFENDER]:
            raise RuntimeError("the episode is over; call reset()")
        env.step(action)
        self._run_attacker()
        info = dict(env.infos[DEFENDER])
        terminated = bool(env.terminations[DEFENDER])
        reward = float(env.rewards[DEFENDER]) if terminated else 0.0
        return env.observe(DEFENDER), reward, terminated, False, info

    def render(self) -> str | None:
        return self._env.render()

    def _forget_game(self) -> None:
        # A policy attacker keeps state per game id; each episode has its own, so drop the last.
        forget = getattr(self.attacker, "forget", None)
        if self._game_id and callable(forget):
            forget(self._game_id)
        self._game_id = ""

    def close(self) -> None:
        self._forget_game()
        self._env.close()

    def summary(self) -> dict[str, Any]:
        """End-of-episode fields (outcome, stepwise ToM data, ...) once the game is over."""
        return self._env.summary()
